#include "comm/ring.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <span>
#include <vector>

#include "comm/reduce_sum.hpp"

namespace troupe::comm {
namespace {

// Ring on n ranks seen from position r; segments are numbered modulo n. Per chunk:
//  1. send own chunk of segment r-1 to the right (reduce-scatter step 0);
//  2. n-2 times: receive the left's partial sum of segment r-s-2, add it into own chunk, send
//     the sum on to the right (reduce-scatter step s+1);
//  3. receive the left's partial sum of segment r, add it into own: segment r is final.
//     Reduce-scatter ends here; all-reduce sends it on (all-gather step 0);
//  4. n-2 times: receive a final segment from the left into place, send it on;
//  5. receive the last final segment into place.
// A plain all-gather starts at 4 with segment r as given. Message index: reduce-scatter step
// s, chunk c -> s * K + c; all-gather step s -> (n-1+s) * K + c after a reduce-scatter, s * K + c
// alone; K the most chunks of a segment.
//
// How a chunk crosses a link (this rank -> its right) is chosen per link, the same way at both
// ends:
//  - as a message: UCX sends it from the buffer; the right receives it into a scratch slot (to
//    add; slots are few, so these receives are posted in order as slots come free) or into place;
//  - through a mapped block, when both ends lend a region and map each other's (one host, shared
//    memory) and the chunk fits a block: the chunk is copied into one of this engine's blocks and
//    only the block's offset travels (8 bytes, at the chunk's index); the right adds the chunk
//    into its buffer, or copies it there, straight from the block, then sends an empty
//    acknowledgement (index ack_base + the chunk's), which gives the block back. UCX's FIFO
//    copies every byte twice (in, out); this copies it once, and the addition reads the
//    neighbour's memory directly. A chunk is staged as soon as it is final here, so its copy
//    into the block reads it from cache.
//
// The states of one chunk, and what moves it on (all on the progress thread):
//
//   reduce-scatter chunk (step s)                      all-gather chunk (step s)
//   [arrive from the left] --arrived-->                [wait: own reduce-scatter send of this
//   [added into the buffer]                             chunk in flight] --sent-->
//      s < n-2: send on as step s+1                    [arrive from the left into place]
//      s = n-2: final; all-reduce sends it                s < n-2: send on as step s+1
//               as all-gather step 0                      s = n-2: done
//
// "Sent" is the message's completion, or the copy into a block: the wait before an all-gather
// arrival keeps UCX's rule that a send buffer is not written while the send is in flight (in
// all-reduce, all-gather step s lands on the chunk that reduce-scatter step s sent).
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
    segments_ = std::move(shape.segments);
    if (segments_.empty()) {
      for (int j = 0; j < n_; ++j) segments_.push_back(segment_of(this->buffer().numel(), n_, j));
    }
    TROUPE_CHECK(static_cast<int>(segments_.size()) == n_, "a ring needs one segment per rank");
    for (int j = 0; j < n_; ++j) {
      chunks_max_ = std::max(chunks_max_, chunks(j));
      largest_segment_ = std::max(largest_segment_, segments_[j].count);
    }
    const std::size_t chunk_bytes = static_cast<std::size_t>(chunk_) * compute::dtype_size(this->buffer().dtype());
    // A token buffer's chunks are token messages: no bytes to stage in a block.
    const bool lends =
        shape.mapped_blocks && engine.mapped_block_bytes() >= chunk_bytes && !this->buffer().moves_as_token();
    left_region_ = engine.peer_region(left_);
    mapped_from_left_ = n_ > 1 && lends && !left_region_.empty();
    mapped_to_right_ = n_ > 1 && lends && !engine.peer_region(right_).empty();
    ack_base_ = static_cast<std::uint32_t>((reduces() && gathers() ? 2 : 1) * (n_ - 1) * chunks_max_);
    if (mapped_from_left_ || mapped_to_right_) offsets_.resize(2 * ack_base_);
  }
  ~RingOp() override { return_held_blocks(); }
  // A failed ring's blocks are given back at once: a new epoch's operations need them, and the
  // neighbour that would acknowledge them has given up this operation too.
  void release_after_failure() override { return_held_blocks(); }

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
    // A chunk through a block costs two requests at each end (offset and acknowledgement).
    const std::uint64_t per_send = mapped_to_right_ ? 2 : 1;
    const std::uint64_t per_recv = mapped_from_left_ ? 2 : 1;
    std::uint64_t requests = 0;
    for (int s = 0; s < n_ - 1; ++s) {
      if (reduces()) requests += per_send * chunks(rs_send_segment(s)) + per_recv * chunks(rs_recv_segment(s));
      if (gathers()) requests += per_send * chunks(ag_send_segment(s)) + per_recv * chunks(ag_recv_segment(s));
    }
    expect(requests);
    if (requests == 0) return;
    if (reduces()) {
      if (!mapped_from_left_) take_scratch_slots();
      const int first = rs_send_segment(0);
      for (std::int64_t c = 0; c < chunks(first); ++c) send_rs(0, c);
      post_rs_arrivals();
    } else {
      const int own = ag_send_segment(0);
      for (std::int64_t c = 0; c < chunks(own); ++c) send_ag(0, c);
      for (int s = 0; s < n_ - 1; ++s) {
        for (std::int64_t c = 0; c < chunks(ag_recv_segment(s)); ++c) arrive_ag(s, c);
      }
    }
  }

  void take_scratch_slots() {
    std::int64_t receives = 0;
    for (int s = 0; s < n_ - 1; ++s) receives += chunks(rs_recv_segment(s));
    const int slots = static_cast<int>(std::min<std::int64_t>(window_, std::max<std::int64_t>(receives, 1)));
    slot_elements_ = std::min(chunk_, largest_segment_);
    if (!buffer().moves_as_token())  // a token message lands nowhere
      scratch_ = pool_->take(static_cast<std::size_t>(slot_elements_ * slots) * compute::dtype_size(buffer().dtype()));
    for (int slot = 0; slot < slots; ++slot) free_slots_.push_back(slot);
  }

  // Sends the buffer's chunk c of `segment` to the right under `index`; `sent` runs once the
  // buffer's chunk may be written again.
  void send_chunk(std::uint32_t index, int segment, std::int64_t c, std::function<void()> sent) {
    const std::byte* chunk = bytes_at(chunk_offset(segment, c));
    const std::size_t bytes = chunk_bytes(segment, c);
    if (!mapped_to_right_) {
      send(right_, index, chunk, bytes, std::move(sent));
      return;
    }
    engine_.take_mapped_block([self = shared_from_this(), this, index, chunk, bytes,
                               sent = std::move(sent)](MappedBlock block) {
      if (finished()) {
        engine_.give_back_mapped_block(block.offset);
        return;
      }
      std::memcpy(block.data, chunk, bytes);
      held_blocks_.push_back(block.offset);
      offsets_[index] = block.offset;
      // The offset reaches the right through UCX's shared memory after the copy is visible there.
      std::atomic_thread_fence(std::memory_order_release);
      send(right_, index, &offsets_[index], sizeof(std::uint64_t));
      recv(right_, ack_base_ + index, nullptr, 0, [this, offset = block.offset] { give_back(offset); });
      if (sent) sent();
    });
  }

  // Takes the left's chunk c of `segment`, sent under `index`, into the buffer: added to what is
  // there (`add`) or in place of it; then runs `arrived`.
  void arrive(std::uint32_t index, int segment, std::int64_t c, bool add, std::function<void()> arrived) {
    std::byte* into = bytes_at(chunk_offset(segment, c));
    const std::size_t bytes = chunk_bytes(segment, c);
    const auto count = static_cast<std::size_t>(chunk_count(segment, c));
    if (mapped_from_left_) {
      std::uint64_t& offset = offsets_[ack_base_ + index];
      recv(left_, index, &offset, sizeof offset, [this, index, into, bytes, count, add, &offset, arrived] {
        TROUPE_CHECK(offset <= left_region_.size() && bytes <= left_region_.size() - offset,
                     "a neighbour named a block outside its region");
        std::atomic_thread_fence(std::memory_order_acquire);
        const std::byte* from = left_region_.data() + offset;
        if (add) {
          reduce_sum(buffer().dtype(), into, from, count);
        } else {
          std::memcpy(into, from, bytes);
        }
        // The reads above are done before the acknowledgement lets the left reuse the block.
        std::atomic_thread_fence(std::memory_order_release);
        send(left_, ack_base_ + index, nullptr, 0);
        arrived();
      });
      return;
    }
    if (!add) {
      recv(left_, index, into, bytes, std::move(arrived));
      return;
    }
    const int slot = free_slots_.back();
    free_slots_.pop_back();
    std::byte* scratch = scratch_ ? scratch_.get() + static_cast<std::size_t>(slot * slot_elements_) *
                                                         compute::dtype_size(buffer().dtype())
                                  : nullptr;
    recv(left_, index, scratch, bytes, [this, into, scratch, count, slot, arrived] {
      if (!buffer().moves_as_token()) reduce_sum(buffer().dtype(), into, scratch, count);
      free_slots_.push_back(slot);
      arrived();
      post_rs_arrivals();
    });
  }

  void give_back(std::uint64_t offset) {
    held_blocks_.erase(std::find(held_blocks_.begin(), held_blocks_.end(), offset));
    engine_.give_back_mapped_block(offset);
  }

  void send_rs(int s, std::int64_t c) {
    send_chunk(rs_index(s, c), rs_send_segment(s), c, [this, s, c] {
      if (gathers()) arrive_ag(s, c);
    });
  }

  // Posts the reduce-scatter arrivals in (step, chunk) order: all at once through blocks, else
  // while scratch slots are free.
  void post_rs_arrivals() {
    while ((mapped_from_left_ || !free_slots_.empty()) && next_rs_step_ < n_ - 1) {
      const int segment = rs_recv_segment(next_rs_step_);
      if (next_rs_chunk_ >= chunks(segment)) {
        ++next_rs_step_;
        next_rs_chunk_ = 0;
        continue;
      }
      const int s = next_rs_step_;
      const std::int64_t c = next_rs_chunk_++;
      arrive(rs_index(s, c), segment, c, true, [this, s, c] {
        if (s < n_ - 2) {
          send_rs(s + 1, c);
        } else if (gathers()) {
          send_ag(0, c);
        }
      });
    }
  }

  void send_ag(int s, std::int64_t c) { send_chunk(ag_index(s, c), ag_send_segment(s), c, {}); }

  void arrive_ag(int s, std::int64_t c) {
    arrive(ag_index(s, c), ag_recv_segment(s), c, false, [this, s, c] {
      if (s < n_ - 2) send_ag(s + 1, c);
    });
  }

  // Blocks still out when a failed operation goes: whatever the neighbour reads from them now
  // belongs to an operation that failed on its side too.
  void return_held_blocks() {
    if (held_blocks_.empty()) return;
    engine_.post([&engine = engine_, blocks = std::move(held_blocks_)] {
      for (std::uint64_t offset : blocks) engine.give_back_mapped_block(offset);
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
  std::int64_t largest_segment_ = 0;
  std::shared_ptr<ScratchPool> pool_;
  std::int64_t slot_elements_ = 0;  // a chunk, or the largest segment when that is smaller
  std::shared_ptr<std::byte> scratch_;
  std::vector<int> free_slots_;
  int next_rs_step_ = 0;
  std::int64_t next_rs_chunk_ = 0;
  // Through mapped blocks: the left's region as mapped here, block offsets sent (by message index)
  // and received (at ack_base_ + index), and this engine's blocks the right has not yet read.
  bool mapped_from_left_ = false;
  bool mapped_to_right_ = false;
  std::span<const std::byte> left_region_;
  std::uint32_t ack_base_ = 0;
  std::vector<std::uint64_t> offsets_;
  std::vector<std::uint64_t> held_blocks_;
};

}  // namespace

std::int64_t ring_chunk_elements(std::int64_t largest_segment, int ranks, RingPhases phases, std::int64_t wanted) {
  // Every step's messages, and as many acknowledgements when chunks go through mapped blocks.
  const int steps = 2 * (phases == RingPhases::all_reduce ? 2 : 1) * std::max(ranks - 1, 1);
  const std::int64_t chunks_limit = max_messages_per_operation / steps;
  const std::int64_t chunk = std::max<std::int64_t>(wanted, 1);
  if ((largest_segment + chunk - 1) / chunk <= chunks_limit) return chunk;
  return (largest_segment + chunks_limit - 1) / chunks_limit;
}

std::shared_ptr<CollectiveOp> make_ring_op(Engine& engine, const Group& group, MessageKey key, RingPhases phases,
                                           compute::Tensor buffer, RingShape shape, Callback done) {
  return std::make_shared<RingOp>(engine, group, key, phases, std::move(buffer), shape, std::move(done));
}

}  // namespace troupe::comm
