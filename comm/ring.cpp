#include "comm/ring.hpp"

#include <algorithm>
#include <vector>

#include "comm/reduce_sum.hpp"

namespace troupe::comm {
namespace {

// Ring on n ranks seen from position r; segments are numbered modulo n. Per chunk:
//  1. send own chunk of segment r-1 to the right (reduce-scatter step 0);
//  2. n-2 times: receive the left's partial sum of segment r-s-2 into a scratch slot, add own
//     chunk, send the sum on to the right (reduce-scatter step s+1);
//  3. receive the left's partial sum of segment r, add own: segment r is final. Reduce-scatter
//     ends here; all-reduce sends it on (all-gather step 0);
//  4. n-2 times: receive a final segment from the left into place, send it on;
//  5. receive the last final segment into place.
// A plain all-gather starts at 4 with segment r as given. Message index: reduce-scatter step
// s, chunk c -> s * K + c; all-gather step s -> (n-1+s) * K + c after a reduce-scatter, s * K + c
// alone; K the most chunks of a segment.
//
// The states of one chunk, and what moves it on (all on the progress thread):
//
//   reduce-scatter chunk (step s)                      all-gather chunk (step s)
//   [wait for a slot] --slot free-->                   [wait: own reduce-scatter send of this
//   [receive into slot] --received-->                   chunk in flight] --send done-->
//   [add into buffer, free slot]                       [receive into place] --received-->
//      s < n-2: send on as step s+1                       s < n-2: send on as step s+1
//      s = n-2: final; all-reduce sends it                s = n-2: done
//               as all-gather step 0
//
// The wait before an all-gather receive keeps UCX's rule that a send buffer is not written
// while the send is in flight: in all-reduce, the receive of all-gather step s lands on the
// chunk that reduce-scatter step s sent.
class RingOp final : public CollectiveOp {
 public:
  RingOp(Engine& engine, const Group& group, MessageKey key, RingPhases phases, compute::Tensor buffer, RingShape shape,
         Callback done)
      : CollectiveOp(engine, phases_kind(phases), group, key, std::move(buffer), std::move(done)),
        phases_(phases),
        n_(group.size()),
        r_(group.position_of(engine.rank())),
        chunk_(shape.chunk_elements),
        window_(shape.window),
        pool_(std::move(shape.scratch)) {
    left_ = group.ranks[(r_ - 1 + n_) % n_];
    right_ = group.ranks[(r_ + 1) % n_];
    for (int j = 0; j < n_; ++j) {
      segments_.push_back(segment_of(this->buffer().numel(), n_, j));
      chunks_max_ = std::max(chunks_max_, chunks(j));
    }
  }

 private:
  static TrafficKind phases_kind(RingPhases phases) {
    switch (phases) {
      case RingPhases::reduce_scatter: return TrafficKind::reduce_scatter;
      case RingPhases::all_gather: return TrafficKind::all_gather;
      case RingPhases::all_reduce: return TrafficKind::all_reduce;
    }
    TROUPE_CHECK(false, "a ring of unknown phases");
  }

  bool reduces() const { return phases_ != RingPhases::all_gather; }
  bool gathers() const { return phases_ != RingPhases::reduce_scatter; }
  int seg(int j) const { return ((j % n_) + n_) % n_; }
  std::int64_t chunks(int segment) const { return (segments_[segment].count + chunk_ - 1) / chunk_; }
  std::int64_t chunk_offset(int segment, std::int64_t c) const { return segments_[segment].offset + c * chunk_; }
  std::int64_t chunk_count(int segment, std::int64_t c) const {
    return std::min(chunk_, segments_[segment].count - c * chunk_);
  }
  std::size_t chunk_bytes(int segment, std::int64_t c) const {
    return static_cast<std::size_t>(chunk_count(segment, c)) * compute::dtype_size(buffer().dtype());
  }
  std::uint32_t rs_index(int s, std::int64_t c) const { return static_cast<std::uint32_t>(s * chunks_max_ + c); }
  std::uint32_t ag_index(int s, std::int64_t c) const {
    const int first = reduces() ? n_ - 1 : 0;
    return static_cast<std::uint32_t>((first + s) * chunks_max_ + c);
  }
  // Reduce-scatter step s sends segment r-s-1 and receives r-s-2; all-gather step s sends
  // segment r-s and receives r-s-1.
  int rs_send_segment(int s) const { return seg(r_ - s - 1); }
  int rs_recv_segment(int s) const { return seg(r_ - s - 2); }
  int ag_send_segment(int s) const { return seg(r_ - s); }
  int ag_recv_segment(int s) const { return seg(r_ - s - 1); }

  void begin() override {
    std::uint64_t requests = 0;
    for (int s = 0; s < n_ - 1; ++s) {
      if (reduces()) requests += chunks(rs_send_segment(s)) + chunks(rs_recv_segment(s));
      if (gathers()) requests += chunks(ag_send_segment(s)) + chunks(ag_recv_segment(s));
    }
    expect(requests);
    if (requests == 0) return;
    if (reduces()) {
      std::int64_t receives = 0;
      for (int s = 0; s < n_ - 1; ++s) receives += chunks(rs_recv_segment(s));
      const int slots = static_cast<int>(std::min<std::int64_t>(window_, std::max<std::int64_t>(receives, 1)));
      slot_elements_ = std::min(chunk_, segments_[0].count);
      scratch_ = pool_->take(static_cast<std::size_t>(slot_elements_ * slots) * compute::dtype_size(buffer().dtype()));
      for (int slot = 0; slot < slots; ++slot) free_slots_.push_back(slot);
      const int first = rs_send_segment(0);
      for (std::int64_t c = 0; c < chunks(first); ++c) send_rs(0, c);
      post_rs_recvs();
    } else {
      const int own = ag_send_segment(0);
      for (std::int64_t c = 0; c < chunks(own); ++c) send_ag(0, c);
      for (int s = 0; s < n_ - 1; ++s) {
        for (std::int64_t c = 0; c < chunks(ag_recv_segment(s)); ++c) recv_ag(s, c);
      }
    }
  }

  void send_rs(int s, std::int64_t c) {
    const int segment = rs_send_segment(s);
    send(right_, rs_index(s, c), bytes_at(chunk_offset(segment, c)), chunk_bytes(segment, c), [this, s, c] {
      if (gathers()) recv_ag(s, c);
    });
  }

  // Receives the next reduce-scatter chunks, in (step, chunk) order, while slots are free.
  void post_rs_recvs() {
    while (!free_slots_.empty() && next_rs_step_ < n_ - 1) {
      const int segment = rs_recv_segment(next_rs_step_);
      if (next_rs_chunk_ >= chunks(segment)) {
        ++next_rs_step_;
        next_rs_chunk_ = 0;
        continue;
      }
      const int slot = free_slots_.back();
      free_slots_.pop_back();
      const int s = next_rs_step_;
      const std::int64_t c = next_rs_chunk_++;
      std::byte* into =
          scratch_.get() + static_cast<std::size_t>(slot * slot_elements_) * compute::dtype_size(buffer().dtype());
      recv(left_, rs_index(s, c), into, chunk_bytes(segment, c), [this, s, c, slot, into] {
        const int segment = rs_recv_segment(s);
        reduce_sum(buffer().dtype(), bytes_at(chunk_offset(segment, c)), into,
                   static_cast<std::size_t>(chunk_count(segment, c)));
        free_slots_.push_back(slot);
        if (s < n_ - 2) {
          send_rs(s + 1, c);
        } else if (gathers()) {
          send_ag(0, c);
        }
        post_rs_recvs();
      });
    }
  }

  void send_ag(int s, std::int64_t c) {
    const int segment = ag_send_segment(s);
    send(right_, ag_index(s, c), bytes_at(chunk_offset(segment, c)), chunk_bytes(segment, c));
  }

  void recv_ag(int s, std::int64_t c) {
    const int segment = ag_recv_segment(s);
    recv(left_, ag_index(s, c), bytes_at(chunk_offset(segment, c)), chunk_bytes(segment, c), [this, s, c] {
      if (s < n_ - 2) send_ag(s + 1, c);
    });
  }

  RingPhases phases_;
  int n_;
  int r_;
  int left_ = 0;
  int right_ = 0;
  std::int64_t chunk_;
  int window_;
  std::vector<Slice> segments_;
  std::int64_t chunks_max_ = 0;
  std::shared_ptr<ScratchPool> pool_;
  std::int64_t slot_elements_ = 0;  // a chunk, or the largest segment when that is smaller
  std::shared_ptr<std::byte> scratch_;
  std::vector<int> free_slots_;
  int next_rs_step_ = 0;
  std::int64_t next_rs_chunk_ = 0;
};

}  // namespace

std::int64_t ring_chunk_elements(std::int64_t count, int ranks, RingPhases phases, std::int64_t wanted) {
  const int steps = (phases == RingPhases::all_reduce ? 2 : 1) * std::max(ranks - 1, 1);
  const std::int64_t chunks_limit = max_messages_per_operation / steps;
  const std::int64_t largest_segment = segment_of(count, ranks, 0).count;
  const std::int64_t chunk = std::max<std::int64_t>(wanted, 1);
  if ((largest_segment + chunk - 1) / chunk <= chunks_limit) return chunk;
  return (largest_segment + chunks_limit - 1) / chunks_limit;
}

std::shared_ptr<CollectiveOp> make_ring_op(Engine& engine, const Group& group, MessageKey key, RingPhases phases,
                                           compute::Tensor buffer, RingShape shape, Callback done) {
  return std::make_shared<RingOp>(engine, group, key, phases, std::move(buffer), shape, std::move(done));
}

}  // namespace troupe::comm
