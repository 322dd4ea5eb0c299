#pragma once
// One rank's whole training run (training_loop.hpp says what it drives): restore, the step loop
// with the shell's orders at step boundaries, checkpoints, progress lines and validation, the
// summary and the closing sample. `troupe train` runs it in one process; each rank of a job runs
// it in its worker actor, and only rank 0 reports.

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>

#include "actors/job_options.hpp"
#include "actors/worker/in_place_recovery.hpp"
#include "actors/worker/job_data.hpp"
#include "actors/worker/replica_loop.hpp"
#include "actors/worker/training_loop.hpp"
#include "compute/backend.hpp"
#include "compute/train/trainer.hpp"
#include "monitor/metrics.hpp"
#include "monitor/step_control.hpp"
#include "monitor/trace.hpp"
#include "monitor/work_progress.hpp"

namespace troupe::actors {

// This rank's part in a rescue snapshot: shard `writer` of `writers` (one per pipeline stage).
struct RescueRole {
  int writer = 0;
  int writers = 1;
  std::chrono::milliseconds commit_timeout{0};  // RescueTiming::commit_timeout of the job's fault.rescue_timeout
};

// Thrown at a step boundary where the job ordered a rescue (the order waits in the mailbox): the
// steps done are the state to write, as after a step that failed before its update.
class RescueAtBoundary : public std::runtime_error {
 public:
  explicit RescueAtBoundary(long steps_done)
      : std::runtime_error("rescue ordered while waiting after step " + std::to_string(steps_done)) {}
};

// Rescue (node jobs): when a step throws, role says whether the job wants this rank's memory of
// the last completed step written (it may wait for the job's word); done hears how the write
// went. Empty: a failed step just fails the run.
struct RescueHooks {
  std::function<std::optional<RescueRole>(std::exception_ptr)> role;
  std::function<void(long steps_done, const Status& written)> done;
};

struct RunOutcome {
  int exit_code = 0;   // 0 done, 1 training failed (diverged, lost a peer)
  std::string reason;  // one line when exit_code != 0
};

// In-place recovery (node jobs where it applies; in_place_recovery.hpp): `survive` is what a
// rank does when the job's order ends its step, holding the state after `steps_done` steps;
// `join` is set only for a respawned worker, which takes its state that way before its first step.
// Both are handed the run's own checkpoints, for a rollback. Empty: the run has no part in in-place
// recoveries.
struct RecoveryHooks {
  std::function<RecoveryResult(const recover_msg&, std::int64_t steps_done, TrainingLoop&, const CheckpointRollback&)>
      survive;
  std::function<RecoveryResult(TrainingLoop&, const CheckpointRollback&)> join;
  // Throws the order that ended the step (RecoveryOrdered, or a rescue or stop) when one is waiting:
  // for waits outside a step, as the coordinator's for a checkpoint's shards, that a writer which
  // died would make last the commit timeout.
  std::function<void()> take_waiting_orders;
  // Told the steps whose update the rank's state holds, whenever that changes: an order whose
  // failed rank completed more steps is taken only once this rank holds as many.
  std::function<void(std::int64_t)> holds_steps;
};

// What a rank's run is given besides its loop: its progress (the watchdog's view), metrics (null:
// off), the shell's orders at step boundaries (null: none come), its part in rescue snapshots and
// in-place recoveries, and whether it reports (progress lines, summary and sample: rank 0).
struct RunServices {
  monitor::WorkProgress& progress;
  monitor::WorkerMetrics* metrics = nullptr;
  monitor::StepControl* control = nullptr;
  RescueHooks rescue;
  bool reports = true;
  // The gradient compressor's totals so far (empty: the sums are not compressed); each step's
  // share goes into its progress record.
  std::function<monitor::CompressionReading()> compression;
  RecoveryHooks recovery;
  // train.sync diloco with pipeline.trace: the steps and outer syncs are recorded here (null: none).
  monitor::TraceRecorder* trace = nullptr;
  // Called once this rank restored the newest checkpoint (or found none), before its first step;
  // may be empty. DiLoCo's islands wait there for every rank: an island trains alone between syncs,
  // so without the wait it could commit a newer checkpoint before a slower island's rank read the
  // one the job resumes from.
  std::function<void()> restored;
};

// Steps, progress lines, validation, the summary and (on the reporting rank) the sample; with
// checkpoint.resume it starts where the newest valid checkpoint left off, and it saves
// checkpoints as checkpoint.* says. A checkpoint that cannot be restored is exit code 2. A
// failing collective (a lost peer) arrives as an exception from the loop, after this rank has
// written its rescue snapshot when the job asked for one.
RunOutcome drive_training(const ResolvedJob& job, const JobData& data, const std::string& backend_name,
                          TrainingLoop& loop, const RunServices& services);

// A whole-model run (ReplicaLoop) with `data_parallel`'s hooks (default: one process), on the
// rank's rows of each sequence under a context group (compute/model/context_shard.hpp), as one of
// DiLoCo's `islands` under train.sync diloco (`data_parallel` is then the rank's island), with its
// share of the experts under an expert group (compute/moe/expert_exchange.hpp).
RunOutcome run_training(const ResolvedJob& job, compute::Backend& backend, const JobData& data,
                        compute::DataParallel data_parallel, const RunServices& services,
                        compute::ContextShardGroup context = {}, compute::IslandGroup islands = {},
                        compute::ExpertGroup experts = {});

}  // namespace troupe::actors
