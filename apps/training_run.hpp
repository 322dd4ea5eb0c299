#pragma once
// One rank's whole training run: model init, the step loop with progress lines, validation,
// the summary and the closing sample. `troupe train` runs it in one process; each node of a
// data-parallel job runs it with the group's DataParallel hooks, and only rank 0 reports.

#include <cstdint>
#include <functional>
#include <string>

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

// What a rank's run drives: a Trainer over the whole model (one process, or a data-parallel
// replica) or a pipeline stage's trainer. Every rank of a job calls these in the same order.
struct TrainingLoop {
  std::function<compute::StepResult()> step;
  std::function<double(int batches)> evaluate;
  std::function<double()> param_norm;  // of the whole model; the same digits on every layout
  std::int64_t tokens_per_step = 0;
  std::string layout;                 // "2 rank(s) x batch 8 x seq 256 x accum 1", for the log
  compute::GPT* whole_model = nullptr;  // for the closing sample; null when no rank holds it
};

// The job's TrainerOptions (batch, sequence, schedule, AdamW, clip, seed; one process).
compute::TrainerOptions trainer_options(const ResolvedJob& job);

// Steps, progress lines, validation, the summary and (on the reporting rank) the sample.
RunOutcome drive_training(const ResolvedJob& job, const JobData& data, const std::string& backend_name,
                          TrainingLoop& loop, bool reports, monitor::WorkProgress& progress);

// A whole-model run with `data_parallel`'s hooks (default: one process), through drive_training.
// Throws nothing the caller must catch except internal invariants; a failing gradient sum (a
// lost peer) arrives as an exception from the DataParallel hook and becomes exit code 1.
// `progress` hears of every step and validation as it begins and ends.
RunOutcome run_training(const ResolvedJob& job, compute::Backend& backend, const JobData& data,
                        compute::DataParallel data_parallel, monitor::WorkProgress& progress);

}  // namespace troupe::apps
