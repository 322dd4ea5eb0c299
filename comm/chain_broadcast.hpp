#pragma once
// Broadcast as a pipelined chain along the ring (internal to comm/; Communicator is the entry
// point): the root's buffer flows root -> root+1 -> ... -> root-1 in chunks, each rank
// forwarding a chunk as soon as it has it. Every link carries the buffer once, so for large
// buffers the time is about one buffer's transfer plus n-2 chunks, whatever n is.

#include <memory>

#include "comm/collective_op.hpp"

namespace troupe::comm {

std::shared_ptr<CollectiveOp> make_chain_broadcast_op(Engine& engine, const Group& group, MessageKey key, int root,
                                                      compute::Tensor buffer, std::int64_t chunk_elements,
                                                      Callback done);

}  // namespace troupe::comm
