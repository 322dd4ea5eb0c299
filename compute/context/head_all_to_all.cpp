#include "compute/context/head_all_to_all.hpp"

#include <cstddef>
#include <vector>

#include "compute/context/row_copy.hpp"
#include "compute/cpu/cpu_kernels.hpp"

namespace troupe::compute::context {
namespace {

template <typename Real>
class HeadAllToAll final : public ContextAttention<Real> {
 public:
  HeadAllToAll(const ContextShape& shape, ContextExchange& exchange)
      : s_(shape),
        exchange_(exchange),
        group_heads_(shape.heads / exchange.shards()),
        group_channels_(shape.channels / exchange.shards()) {}

  Status forward(Real* out, const Real* qkv) override {
    const int C = s_.channels, Cg = group_channels_, T = s_.split.T;
    // 1 and 2. head group r's q, k, v over the whole sequence.
    std::vector<Real> qkv_h(static_cast<std::size_t>(s_.B) * T * 3 * Cg);
    if (Status st = gather_head_group(qkv_h, qkv); !st) return st;
    std::vector<Real> out_h(static_cast<std::size_t>(s_.B) * T * Cg);
    lse_.resize(static_cast<std::size_t>(s_.B) * group_heads_ * T);
    cpu::attention_forward(out_h.data(), lse_.data(), qkv_h.data(), T, Cg, group_heads_, 0, s_.B * group_heads_);
    // 3. the output of rank i's rows back to rank i.
    std::vector<Real> sent = from_positions(out_h.data(), Cg);
    std::vector<Real> got(sent.size());
    if (Status st = exchange(sent, got); !st) return st;
    ungroup(out, got.data(), 1, C);
    return Status::success();
  }

  Status backward(Real* dqkv, const Real* dout, const Real* qkv) override {
    const int Cg = group_channels_, T = s_.split.T;
    // The head group's q, k, v again, from the rank's own rows: the same values the forward
    // moved, so nothing of the whole sequence is kept between the passes.
    std::vector<Real> qkv_h(static_cast<std::size_t>(s_.B) * T * 3 * Cg);
    if (Status st = gather_head_group(qkv_h, qkv); !st) return st;
    std::vector<Real> sent = by_group(dout, 1, s_.channels);
    std::vector<Real> got(sent.size());
    if (Status st = exchange(sent, got); !st) return st;
    std::vector<Real> dout_h(static_cast<std::size_t>(s_.B) * T * Cg);
    to_positions(dout_h.data(), got.data(), Cg);
    std::vector<Real> dqkv_h(qkv_h.size());
    std::vector<Real> row_dots(lse_.size());
    cpu::attention_backward(dqkv_h.data(), row_dots.data(), dout_h.data(), qkv_h.data(), lse_.data(), T, Cg,
                            group_heads_, 0, s_.B * group_heads_);
    sent = from_positions(dqkv_h.data(), 3 * Cg);
    got.resize(sent.size());
    if (Status st = exchange(sent, got); !st) return st;
    ungroup(dqkv, got.data(), 3, 3 * s_.channels);
    return Status::success();
  }

 private:
  std::size_t local_rows() const { return static_cast<std::size_t>(s_.B) * s_.split.local_rows(); }

  // Steps 1 and 2: q, k, v of head group j to rank j, and the blocks received at their global
  // positions in qkv_h, (B, T, 3 Cg).
  Status gather_head_group(std::vector<Real>& qkv_h, const Real* qkv) {
    const std::vector<Real> sent = by_group(qkv, 3, 3 * s_.channels);
    std::vector<Real> got(sent.size());
    if (Status st = exchange(sent, got); !st) return st;
    to_positions(qkv_h.data(), got.data(), 3 * group_channels_);
    return Status::success();
  }

  Status exchange(const std::vector<Real>& sent, std::vector<Real>& got) {
    return exchange_.all_to_all(bytes_of(sent.data(), sent.size()), writable_bytes_of(got.data(), got.size()));
  }

  // Block j: head group j of each of the `parts` C-wide parts of the rank's rows (q, k, v or out).
  std::vector<Real> by_group(const Real* rows, int parts, int ld) const {
    const int Cg = group_channels_, shards = exchange_.shards();
    const std::size_t block = local_rows() * parts * Cg;
    std::vector<Real> sent(block * shards);
    for (int j = 0; j < shards; ++j) {
      for (int p = 0; p < parts; ++p) {
        copy_columns(sent.data() + j * block, parts * Cg, p * Cg, rows, ld, p * s_.channels + j * Cg, Cg, local_rows());
      }
    }
    return sent;
  }

  // The inverse of by_group: block j's parts land at head group j's columns.
  void ungroup(Real* rows, const Real* got, int parts, int ld) const {
    const int Cg = group_channels_, shards = exchange_.shards();
    const std::size_t block = local_rows() * parts * Cg;
    for (int j = 0; j < shards; ++j) {
      for (int p = 0; p < parts; ++p) {
        copy_columns(rows, ld, p * s_.channels + j * Cg, got + j * block, parts * Cg, p * Cg, Cg, local_rows());
      }
    }
  }

  // Block i (rank i's rows, `width` wide) to its global positions in whole (B, T, width).
  void to_positions(Real* whole, const Real* got, int width) const {
    const std::size_t block = local_rows() * width;
    for (int i = 0; i < exchange_.shards(); ++i) put_rows(whole, got + i * block, s_.B, width, s_.split, i);
  }

  // Block i: rank i's rows of whole (B, T, width).
  std::vector<Real> from_positions(const Real* whole, int width) const {
    const std::size_t block = local_rows() * width;
    std::vector<Real> sent(block * exchange_.shards());
    for (int i = 0; i < exchange_.shards(); ++i) take_rows(sent.data() + i * block, whole, s_.B, width, s_.split, i);
    return sent;
  }

  ContextShape s_;
  ContextExchange& exchange_;
  int group_heads_, group_channels_;
  std::vector<Real> lse_;  // the head group's, kept from the forward for the backward
};

}  // namespace

template <typename Real>
std::unique_ptr<ContextAttention<Real>> make_head_all_to_all(const ContextShape& shape, ContextExchange& exchange) {
  return std::make_unique<HeadAllToAll<Real>>(shape, exchange);
}

template std::unique_ptr<ContextAttention<float>> make_head_all_to_all<float>(const ContextShape&, ContextExchange&);
template std::unique_ptr<ContextAttention<double>> make_head_all_to_all<double>(const ContextShape&, ContextExchange&);

}  // namespace troupe::compute::context
