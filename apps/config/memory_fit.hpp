#pragma once
// Whether a job's layout fits the memory each of its ranks may use, checked before any data is
// read or tensor allocated: a layout that cannot fit is refused with one line, naming a layout of
// the same ranks that would fit, instead of ending in an allocation failure or the kernel's OOM
// killer. A rank's need is the layout planner's peak for the job's own layout
// (schedules::plan_layout, apps/config/job_layout.hpp) plus the process's runtime; what it may use
// is apps/config/rank_memory.hpp's. On a CUDA backend the tensors live on the device and the check
// is skipped (docs/configuration.md, "Memory per rank").

#include <optional>

#include "apps/config/job_config.hpp"
#include "apps/config/job_layout.hpp"
#include "apps/config/rank_memory.hpp"
#include "compute/expected.hpp"

namespace troupe::apps {

// What a rank's process holds besides the planner's tensors: the libraries' code and data (CAF,
// UCX, OpenBLAS), thread stacks, the corpus and the comm engine's shared-memory buffers. The
// memory ledger (docs/parallelism.md, "Memory by kind") measured `tiny` on this project's VM at
// 22 MiB of runtime in one process, and 30 MiB of runtime and 4 MiB of comm buffers on each rank
// of two; 40 MiB rounds the larger up, so a job is refused only where the kernel would be short.
// A rank of the sim backend has no kernels' buffers and shares its process with many: 256 ranks
// of a 22,000-parameter model in 8 processes of 32 resided at 8 MiB a rank, 6.4 MiB of it
// runtime (its UCX worker and shared-memory FIFOs, its threads and actors); 12 MiB rounds it up.
// Its model is token tensors (compute/sim/sim_backend.hpp), so for it the check counts only this.
double runtime_bytes_per_rank(compute::BackendKind backend);

// Error naming the size keys, the layout, what a rank needs against `available` (and its source),
// and the nearest layout of the same ranks that fits (apps/config/fitting_layout.hpp), or that none
// does and what the smallest needs.
Status check_memory_fit(const ResolvedJob& job, const JobRanks& ranks, const RankMemory& available);

// check_memory_fit against `memory_limit` per rank, else this machine's memory shared by the ranks
// on it; success when neither is known.
Status check_memory_fit(const ResolvedJob& job, const JobRanks& ranks, std::optional<double> memory_limit);

}  // namespace troupe::apps
