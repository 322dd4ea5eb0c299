#include "comm/recursive_doubling.hpp"

#include <bit>
#include <vector>

#include "comm/reduce_sum.hpp"

namespace troupe::comm {
namespace {

// Position p of n; n' = 2^floor(log2 n) positions take part in the doubling, the other
// extra = n - n' (positions n' + j) fold their buffers into position j first and take the sum
// back at the end. Every partner is 2^k positions away, so each is among the group's partners
// (group.hpp), which the ranks connected to at join. Message index: 0 the fold-in, k + 1 round k,
// rounds + 1 the fold-out.
//
//   position n'+j:  [send own buffer to j] --sent--> [receive the sum from j into place] --> done
//   position p<n':  (p < extra: [receive n'+p's buffer, add])
//                   round k = 0 .. rounds-1: [send own partial sum to p xor 2^k; receive its
//                   partial sum] --both done--> [add]
//                   (p < extra: [send the sum to n'+p]) --> done
// A round's add waits for its send too: UCX's send may still read the buffer until it completes.
class RecursiveDoublingOp final : public CollectiveOp {
 public:
  RecursiveDoublingOp(Engine& engine, const Group& group, MessageKey key, compute::Tensor buffer, Callback done)
      : CollectiveOp(engine, TrafficKind::all_reduce, group, key, std::move(buffer), std::move(done)),
        n_(group.size()),
        p_(group.position_of(engine.rank())),
        core_(static_cast<int>(std::bit_floor(static_cast<unsigned>(n_)))),
        rounds_(std::countr_zero(static_cast<unsigned>(core_))),
        bytes_(this->buffer().nbytes()) {}

 private:
  int extra() const { return n_ - core_; }
  int rank_at(int position) const { return group().ranks[position]; }

  void begin() override {
    if (p_ >= core_) {
      expect(2);
      send(rank_at(p_ - core_), 0, bytes_at(0), bytes_, [this] {
        recv(rank_at(p_ - core_), static_cast<std::uint32_t>(rounds_ + 1), bytes_at(0), bytes_);
      });
      return;
    }
    const bool folds = p_ < extra();
    expect(2 * static_cast<std::uint64_t>(rounds_) + (folds ? 2 : 0));
    if (!buffer().moves_as_token()) scratch_.resize(bytes_);  // a token buffer's messages carry no bytes
    if (folds) {
      recv(rank_at(p_ + core_), 0, scratch_.data(), bytes_, [this] {
        add_scratch();
        round(0);
      });
    } else {
      round(0);
    }
  }

  void round(int k) {
    if (k == rounds_) {
      if (p_ < extra()) send(rank_at(p_ + core_), static_cast<std::uint32_t>(rounds_ + 1), bytes_at(0), bytes_);
      return;
    }
    const int partner = rank_at(p_ ^ (1 << k));
    const auto index = static_cast<std::uint32_t>(k + 1);
    auto both_done = std::make_shared<int>(0);
    auto then = [this, k, both_done] {
      if (++*both_done < 2) return;
      add_scratch();
      round(k + 1);
    };
    send(partner, index, bytes_at(0), bytes_, then);
    recv(partner, index, scratch_.data(), bytes_, then);
  }

  void add_scratch() {
    if (buffer().moves_as_token()) return;
    reduce_sum(buffer().dtype(), bytes_at(0), scratch_.data(), static_cast<std::size_t>(buffer().numel()));
  }

  const int n_, p_, core_, rounds_;
  const std::size_t bytes_;
  std::vector<std::byte> scratch_;
};

}  // namespace

int all_reduce_hops(AllReduceAlgorithm algorithm, int ranks) {
  if (algorithm == AllReduceAlgorithm::ring) return 2 * (ranks - 1);
  const int core = static_cast<int>(std::bit_floor(static_cast<unsigned>(ranks)));
  return std::countr_zero(static_cast<unsigned>(core)) + (ranks > core ? 2 : 0);
}

AllReduceAlgorithm all_reduce_algorithm(int ranks, std::size_t bytes) {
  constexpr int smallest_group = 32;
  constexpr double latency_s = 10e-6, bandwidth = 10e9;
  if (ranks < smallest_group) return AllReduceAlgorithm::ring;
  const double size = static_cast<double>(bytes);
  const double ring = all_reduce_hops(AllReduceAlgorithm::ring, ranks) * (latency_s + size / ranks / bandwidth);
  const double doubling =
      all_reduce_hops(AllReduceAlgorithm::recursive_doubling, ranks) * (latency_s + size / bandwidth);
  return doubling < ring ? AllReduceAlgorithm::recursive_doubling : AllReduceAlgorithm::ring;
}

std::shared_ptr<CollectiveOp> make_recursive_doubling_op(Engine& engine, const Group& group, MessageKey key,
                                                         compute::Tensor buffer, Callback done) {
  return std::make_shared<RecursiveDoublingOp>(engine, group, key, std::move(buffer), std::move(done));
}

}  // namespace troupe::comm
