#include "compute/context/ring_attention.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

#include "compute/context/row_copy.hpp"
#include "compute/cpu/cpu_kernels.hpp"

namespace troupe::compute::context {
namespace {

// Calls f(qa, kb, mask) for each half qa of rank r's queries and half kb of rank j's keys that
// the queries see: every key of an earlier chunk, the causal diagonal of the same chunk.
template <typename F>
void for_each_chunk_pair(const ContextSplit& split, int r, int j, F f) {
  for (int qa = 0; qa < 2; ++qa) {
    for (int kb = 0; kb < 2; ++kb) {
      const int q_chunk = split.chunk_of(r, qa), k_chunk = split.chunk_of(j, kb);
      if (k_chunk < q_chunk) f(qa, kb, cpu::KeyMask::none);
      if (k_chunk == q_chunk) f(qa, kb, cpu::KeyMask::causal);
    }
  }
}

// Half qa of the rank's q (in qkv, rows 3C apart) against half kb of a block's k and v (in kv,
// rows 2C apart: k then v).
template <typename Real>
cpu::AttentionInputs<Real> block_inputs(const ContextShape& s, const Real* qkv, const Real* kv, int qa, int kb,
                                        cpu::KeyMask mask) {
  const int C = s.channels, c = s.split.chunk(), rows = s.split.local_rows();
  const Real* q = qkv + static_cast<std::size_t>(qa) * c * 3 * C;
  const Real* k = kv + static_cast<std::size_t>(kb) * c * 2 * C;
  const std::ptrdiff_t q_batch = static_cast<std::ptrdiff_t>(rows) * 3 * C;
  const std::ptrdiff_t kv_batch = static_cast<std::ptrdiff_t>(rows) * 2 * C;
  return {{q, q_batch, 3 * C}, {k, kv_batch, 2 * C}, {k + C, kv_batch, 2 * C}, c, c, s.heads, C / s.heads, mask};
}

// One chunk pair's forward, merged into the running output and log-sum-exp of the rows it covers.
template <typename Real>
class BlockMerge {
 public:
  explicit BlockMerge(const ContextShape& s)
      : s_(s),
        out_(static_cast<std::size_t>(s.B) * s.split.chunk() * s.channels),
        lse_(static_cast<std::size_t>(s.B) * s.heads * s.split.chunk()) {}

  void add(Real* out, Real* lse, int qa, const cpu::AttentionInputs<Real>& x) {
    const int C = s_.channels, c = s_.split.chunk(), rows = s_.split.local_rows(), hs = C / s_.heads;
    cpu::attention_rows_forward<Real>({out_.data(), static_cast<std::ptrdiff_t>(c) * C, C}, lse_.data(), c, x, 0,
                                      s_.B * s_.heads);
    for (int bh = 0; bh < s_.B * s_.heads; ++bh) {
      const int b = bh / s_.heads, h = bh % s_.heads;
      for (int t = 0; t < c; ++t) {
        Real& l1 = lse[static_cast<std::size_t>(bh) * rows + qa * c + t];
        const Real l2 = lse_[static_cast<std::size_t>(bh) * c + t];
        Real* o1 = out + (static_cast<std::size_t>(b) * rows + qa * c + t) * C + h * hs;
        const Real* o2 = out_.data() + (static_cast<std::size_t>(b) * c + t) * C + h * hs;
        if (l1 == -std::numeric_limits<Real>::infinity()) {
          std::copy(o2, o2 + hs, o1);
          l1 = l2;
          continue;
        }
        const Real top = std::max(l1, l2);
        const Real merged = top + std::log(std::exp(l1 - top) + std::exp(l2 - top));
        const Real w1 = std::exp(l1 - merged), w2 = std::exp(l2 - merged);
        for (int i = 0; i < hs; ++i) o1[i] = w1 * o1[i] + w2 * o2[i];
        l1 = merged;
      }
    }
  }

 private:
  ContextShape s_;
  std::vector<Real> out_, lse_;
};

// D = rowsum(dout * out) per head, (B * NH, T / C).
template <typename Real>
std::vector<Real> row_dots(const ContextShape& s, const Real* dout, const Real* out) {
  const int C = s.channels, rows = s.split.local_rows(), hs = C / s.heads;
  std::vector<Real> D(static_cast<std::size_t>(s.B) * s.heads * rows);
  for (int bh = 0; bh < s.B * s.heads; ++bh) {
    const int b = bh / s.heads, h = bh % s.heads;
    for (int t = 0; t < rows; ++t) {
      const std::size_t at = (static_cast<std::size_t>(b) * rows + t) * C + h * hs;
      Real dot = 0;
      for (int i = 0; i < hs; ++i) dot += dout[at + i] * out[at + i];
      D[static_cast<std::size_t>(bh) * rows + t] = dot;
    }
  }
  return D;
}

// One chunk pair's backward: dq of half qa of the rank's rows (in dqkv) and dk, dv of half kb of
// the block's rows (in dkv, rows 2C apart: dk then dv) += the pair's gradients.
template <typename Real>
void block_backward(const ContextShape& s, Real* dqkv, Real* dkv, const Real* dout, const Real* lse, const Real* D,
                    int qa, int kb, const cpu::AttentionInputs<Real>& x) {
  const int C = s.channels, c = s.split.chunk(), rows = s.split.local_rows();
  Real* dq = dqkv + static_cast<std::size_t>(qa) * c * 3 * C;
  Real* dk = dkv + static_cast<std::size_t>(kb) * c * 2 * C;
  const Real* d = dout + static_cast<std::size_t>(qa) * c * C;
  const std::ptrdiff_t q_batch = static_cast<std::ptrdiff_t>(rows) * 3 * C;
  const std::ptrdiff_t kv_batch = static_cast<std::ptrdiff_t>(rows) * 2 * C;
  cpu::attention_rows_backward<Real>({dq, q_batch, 3 * C}, {dk, kv_batch, 2 * C}, {dk + C, kv_batch, 2 * C},
                                     {d, static_cast<std::ptrdiff_t>(rows) * C, C}, lse + qa * c, D + qa * c, rows, x,
                                     0, s.B * s.heads);
}

template <typename Real>
class RingAttention final : public ContextAttention<Real> {
 public:
  RingAttention(const ContextShape& shape, ContextExchange& exchange) : s_(shape), exchange_(exchange) {}

  Status forward(Real* out, const Real* qkv) override {
    const int C = s_.channels, rows = s_.split.local_rows(), r = exchange_.rank();
    const std::size_t kv_size = static_cast<std::size_t>(s_.B) * rows * 2 * C;
    std::vector<Real> kv(kv_size), next(kv_size);
    copy_columns(kv.data(), 2 * C, 0, qkv, 3 * C, C, 2 * C, s_.B * rows);
    lse_.assign(static_cast<std::size_t>(s_.B) * s_.heads * rows, -std::numeric_limits<Real>::infinity());
    std::fill(out, out + static_cast<std::size_t>(s_.B) * rows * C, Real(0));
    BlockMerge<Real> merge(s_);
    const int shards = exchange_.shards();
    for (int step = 0; step < shards; ++step) {
      const int j = (r - step + shards) % shards;
      const bool more = step + 1 < shards;
      if (more) {
        if (Status st = exchange_.begin_shift(bytes_of(kv.data(), kv_size), writable_bytes_of(next.data(), kv_size));
            !st) {
          return st;
        }
      }
      for_each_chunk_pair(s_.split, r, j, [&](int qa, int kb, cpu::KeyMask mask) {
        merge.add(out, lse_.data(), qa, block_inputs(s_, qkv, kv.data(), qa, kb, mask));
      });
      if (more) {
        if (Status st = exchange_.finish_shift(); !st) return st;
        kv.swap(next);
      }
    }
    out_.assign(out, out + static_cast<std::size_t>(s_.B) * rows * C);
    return Status::success();
  }

  Status backward(Real* dqkv, const Real* dout, const Real* qkv) override {
    const int C = s_.channels, rows = s_.split.local_rows(), r = exchange_.rank();
    const std::size_t half = static_cast<std::size_t>(s_.B) * rows * 2 * C;
    std::vector<Real> block(2 * half), next(2 * half);
    std::fill(block.begin(), block.begin() + static_cast<std::ptrdiff_t>(half), Real(0));
    copy_columns(block.data() + half, 2 * C, 0, qkv, 3 * C, C, 2 * C, s_.B * rows);
    const std::vector<Real> D = row_dots(s_, dout, out_.data());
    std::fill(dqkv, dqkv + static_cast<std::size_t>(s_.B) * rows * 3 * C, Real(0));
    const int shards = exchange_.shards();
    for (int step = 0; step < shards; ++step) {
      const int j = (r - step + shards) % shards;
      Real* dkv = block.data();
      const Real* kv = block.data() + half;
      for_each_chunk_pair(s_.split, r, j, [&](int qa, int kb, cpu::KeyMask mask) {
        block_backward(s_, dqkv, dkv, dout, lse_.data(), D.data(), qa, kb, block_inputs(s_, qkv, kv, qa, kb, mask));
      });
      const std::size_t count = step + 1 < shards ? 2 * half : half;
      if (Status st = exchange_.begin_shift(bytes_of(block.data(), count), writable_bytes_of(next.data(), count));
          !st) {
        return st;
      }
      if (Status st = exchange_.finish_shift(); !st) return st;
      block.swap(next);
    }
    copy_columns(dqkv, 3 * C, C, block.data(), 2 * C, 0, 2 * C, s_.B * rows);
    return Status::success();
  }

 private:
  ContextShape s_;
  ContextExchange& exchange_;
  std::vector<Real> lse_, out_;
};

}  // namespace

template <typename Real>
std::unique_ptr<ContextAttention<Real>> make_ring_attention(const ContextShape& shape, ContextExchange& exchange) {
  return std::make_unique<RingAttention<Real>>(shape, exchange);
}

template std::unique_ptr<ContextAttention<float>> make_ring_attention<float>(const ContextShape&, ContextExchange&);
template std::unique_ptr<ContextAttention<double>> make_ring_attention<double>(const ContextShape&, ContextExchange&);

}  // namespace troupe::compute::context
