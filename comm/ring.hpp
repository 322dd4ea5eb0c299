#pragma once
// Ring reduce-scatter, all-gather and all-reduce (the two in a row), in place, chunked and
// pipelined (internal to comm/; Communicator is the entry point). Bandwidth-optimal: each
// rank sends and receives 2(n-1)/n of the buffer for an all-reduce, whatever n is.
//
// The buffer is split into n segments (segment_of) and every segment into chunks of at most
// chunk_elements; each chunk walks the ring on its own, so while one chunk is being added
// the next is already in flight. Partial sums arrive in a small window of scratch slots (the
// only extra memory); final segments are received straight into place. The reduction order
// of segment j is fixed by the ring: the data of position j+1, plus j+2's, ..., plus j's; the
// all-gather copies that result to every rank, so all ranks hold the same bits on every run.

#include <cstdint>
#include <memory>
#include <vector>

#include "comm/collective_op.hpp"
#include "comm/scratch_pool.hpp"

namespace troupe::comm {

enum class RingPhases : std::uint8_t { reduce_scatter, all_gather, all_reduce };

struct RingShape {
  std::int64_t chunk_elements = 0;
  int window = 0;  // partial-sum receives in flight
  std::shared_ptr<ScratchPool> scratch;
  bool mapped_blocks = true;  // through the engines' mapped blocks where both ends lend them
  // Position p's segment of the buffer; empty means segment_of(numel, n, p). Reduce-scatter and
  // all-gather may take uneven segments (some empty); all-reduce uses the even ones.
  std::vector<Slice> segments;
};

std::shared_ptr<CollectiveOp> make_ring_op(Engine& engine, const Group& group, MessageKey key, RingPhases phases,
                                           compute::Tensor buffer, RingShape shape, Callback done);

// The chunk size, in elements, for a ring whose largest segment holds `largest_segment`
// elements: `wanted`, or larger where the operation would otherwise need more messages than the
// tag's index field can number.
std::int64_t ring_chunk_elements(std::int64_t largest_segment, int ranks, RingPhases phases, std::int64_t wanted);

}  // namespace troupe::comm
