#pragma once
// One rank's whole training run: model init, the step loop with progress lines, validation,
// the summary and the closing sample. `troupe train` runs it in one process; each node of a
// data-parallel job runs it with the group's DataParallel hooks, and only rank 0 reports.

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "actors/worker/job_data.hpp"
#include "checkpoint/run_checkpoints.hpp"
#include "actors/job_options.hpp"
#include "compute/backend.hpp"
#include "compute/train/trainer.hpp"
#include "monitor/metrics.hpp"
#include "monitor/step_control.hpp"
#include "monitor/work_progress.hpp"

namespace troupe::actors {

// This rank's part in a rescue snapshot: shard `writer` of `writers` (one per pipeline stage).
struct RescueRole {
  int writer = 0;
  int writers = 1;
  std::chrono::milliseconds commit_timeout{0};  // RescueTiming::commit_timeout of the job's fault.rescue_timeout
};

// Rescue (node jobs): when a step throws, role says whether the job wants this rank's memory of
// the last completed step written (it may wait for the job's word); done hears how the write
// went. Empty: a failed step just fails the run.
// Thrown at a step boundary where the job ordered a rescue (the order waits in the mailbox): the
// steps done are the state to write, as after a step that failed before its update.
class RescueAtBoundary : public std::runtime_error {
 public:
  explicit RescueAtBoundary(long steps_done)
      : std::runtime_error("rescue ordered while waiting after step " + std::to_string(steps_done)) {}
};

struct RescueHooks {
  std::function<std::optional<RescueRole>(std::exception_ptr)> role;
  std::function<void(long steps_done, const Status& written)> done;
};

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

  // Checkpoints: the state this rank holds (spans into buffers that live as long as the loop),
  // how to continue after a restore, and the rank's place in the job.
  std::vector<checkpoint::HeldRange> held;
  // When `held` mirrors device memory in host buffers: fill them before a save, and copy them
  // back after a restore. Empty when `held` is the training state itself.
  std::function<void()> mirror_to_host;
  std::function<void()> mirror_to_device;
  std::function<void(long steps)> resume_at;
  int rank = 0;
  checkpoint::Grid grid;
  int checkpoint_writers = 1;  // ranks whose held state includes saved ranges

  monitor::WorkerMetrics* metrics = nullptr;  // hears of every finished step; null: metrics are off

  RescueHooks rescue;
  monitor::StepControl* control = nullptr;    // the shell's orders at step boundaries; null: none come
};

// The job's TrainerOptions (batch, sequence, schedule, AdamW, clip, seed; one process).
compute::TrainerOptions trainer_options(const ResolvedJob& job);

// Steps, progress lines, validation, the summary and (on the reporting rank) the sample; with
// checkpoint.resume it starts where the newest valid checkpoint left off, and it saves
// checkpoints as checkpoint.* says. A checkpoint that cannot be restored is exit code 2.
RunOutcome drive_training(const ResolvedJob& job, const JobData& data, const std::string& backend_name,
                          TrainingLoop& loop, bool reports, monitor::WorkProgress& progress);

// A whole-model run with `data_parallel`'s hooks (default: one process), through drive_training.
// Throws nothing the caller must catch except internal invariants; a failing gradient sum (a
// lost peer) arrives as an exception from the DataParallel hook and becomes exit code 1.
// `progress` hears of every step and validation as it begins and ends, `metrics` (when not null)
// of every finished step; `control` (when not null) brings the shell's orders at step boundaries;
// `rescue` is the node's part in rescue snapshots.
RunOutcome run_training(const ResolvedJob& job, compute::Backend& backend, const JobData& data,
                        compute::DataParallel data_parallel, monitor::WorkProgress& progress,
                        monitor::WorkerMetrics* metrics, monitor::StepControl* control = nullptr,
                        RescueHooks rescue = {});

}  // namespace troupe::actors
