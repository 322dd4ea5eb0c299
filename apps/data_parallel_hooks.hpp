#pragma once
// The trainer's data-parallel hooks (compute::DataParallel) carried out by comm's collectives
// over one group: per-layer buckets started while backward runs, ZeRO's reduce-scatter and
// all-gather, scalar sums. A failed collective (a lost peer) throws std::runtime_error with the
// collective's message, which ends the rank's run.

#include <cstdint>

#include "comm/bucket_sums.hpp"
#include "comm/collectives.hpp"
#include "compute/train/trainer.hpp"

namespace troupe::apps {

// `comm` and `buckets` must outlive the returned hooks. `parameters` is the flat buffer's size,
// which ZeRO's shard is a segment of.
compute::DataParallel group_data_parallel(comm::Communicator& comm, comm::BucketSums& buckets, int rank, int world,
                                          int zero_stage, std::int64_t parameters);

}  // namespace troupe::apps
