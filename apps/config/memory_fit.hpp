#pragma once
// Whether a job's workers fit the memory this machine has left, checked before any data is read
// or tensor allocated: a size that cannot fit is refused with one line instead of ending in an
// allocation failure or the kernel's OOM killer. The estimate (compute/model/memory_estimate.hpp)
// covers what a CPU worker allocates for training; on a CUDA backend those live on the device
// and the check is skipped.

#include <string>

#include "apps/config/job_config.hpp"
#include "compute/expected.hpp"
#include "compute/model/memory_estimate.hpp"
#include "compute/model/recompute.hpp"

namespace troupe::apps {

// What one worker of the job needs, keeping what `recompute` keeps: the largest pipeline stage's
// share (every chunk of it under interleaving), with pipeline.microbatches activation slots, or
// the whole model with one.
compute::MemoryEstimate worker_memory(const ResolvedJob& job, compute::Recompute recompute);

// Error naming the size keys, the estimate and `available_bytes` (from `source`) when
// `workers_here` workers need more, and train.recompute full when that would fit
// (docs/configuration.md, "Memory").
Status check_memory_fit(const ResolvedJob& job, int workers_here, double available_bytes, const std::string& source);

// check_memory_fit against what this machine has available.
Status check_memory_fit(const ResolvedJob& job, int workers_here);

}  // namespace troupe::apps
