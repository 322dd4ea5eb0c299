#pragma once
// One rank's whole training run: model init, the step loop with progress lines, validation,
// the summary and the closing sample. `troupe train` runs it in one process; each node of a
// data-parallel job runs it with the group's DataParallel hooks, and only rank 0 reports.

#include "apps/job_data.hpp"
#include "apps/resolved_job.hpp"
#include "compute/backend.hpp"
#include "compute/train/trainer.hpp"
#include "monitor/work_progress.hpp"

namespace troupe::apps {

struct RunOutcome {
  int exit_code = 0;   // 0 done, 1 training failed (diverged, lost a peer)
  std::string reason;  // one line when exit_code != 0
};

// Throws nothing the caller must catch except internal invariants; a failing gradient sum (a
// lost peer) arrives as an exception from the DataParallel hook and becomes exit code 1.
// `progress` hears of every step and validation as it begins and ends.
RunOutcome run_training(const ResolvedJob& job, compute::Backend& backend, const JobData& data,
                        compute::DataParallel data_parallel, monitor::WorkProgress& progress);

}  // namespace troupe::apps
