#pragma once
// Barrier by dissemination (Hensgen, Finkel and Manber), internal to comm/: ceil(log2 n) rounds
// of empty messages, no root, so no rank is a hot spot and the latency is logarithmic.

#include <memory>

#include "comm/collective_op.hpp"

namespace troupe::comm {

std::shared_ptr<CollectiveOp> make_dissemination_barrier_op(Engine& engine, const Group& group, MessageKey key,
                                                            Callback done);

}  // namespace troupe::comm
