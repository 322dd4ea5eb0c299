#pragma once
// The restart policy of `troupe launch` / `troupe train --workers N` (docs/drills.md, "Recovery"),
// as pure functions: what the job does after each attempt, given how the attempt ended, what
// the job has been through so far and the options that matter. The job runner (job_runner.hpp)
// runs the attempts and does what the decision says; nothing here starts, logs or waits.
//
//   attempt ended ──ok, nothing to drop──────────────────────────────────────► finish (0)
//        ├─ the shell's rejoin ─► grow: every node of the host file again, the configured batch
//        │ otherwise: count the failure when restarting could help
//        ├─ not restartable (bad input, Ctrl-C), no checkpoint.dir, or, with nothing to drop,
//        │  the budget spent / a node that cannot come back (without fault.elastic), or the
//        │  previous attempt's failure again with no newer checkpoint (a repeat) ─► stop
//        ├─ nodes to drop (the job's drain; with fault.elastic the failed nodes of a
//        │  spent budget or of a node that cannot come back) ─► shrink (or stop when the
//        │  global batch cannot be kept on the replicas left)
//        └─ otherwise ─► restart from replica (the survivors' rescue snapshot) or checkpoint
//
// A node that fails before joining after a restart "cannot come back" (start_failed, or
// join_timeout naming it); join_timeout on the first attempt is bad input, not a failure.
// A restarted attempt that fails as the one before it did (same kind, same nodes) without leaving
// a checkpoint or rescue snapshot newer than the one it started from is a repeat: the next restart
// would start from the same place and meet the same failure (a full disk, a bug at one step).

#include <optional>
#include <string>
#include <vector>

#include "actors/failure_kind.hpp"
#include "actors/job_options.hpp"
#include "actors/messages.hpp"
#include "actors/recovery_counts.hpp"
#include "actors/recovery_shape.hpp"
#include "compute/expected.hpp"

namespace troupe::actors {

// How one attempt at the job ended: the exit code and one line, whether restarting could help (a
// node failed or was lost; not bad input or Ctrl-C), the kind of failure (none: the launcher gave
// none) and the nodes to blame, the step of the rescue snapshot the survivors wrote (-1: none),
// the nodes the job asked to leave out of the next attempt (drain), and the newest checkpoint in
// checkpoint.dir when the attempt started and when it ended, the rescue snapshot included (-1:
// none).
struct AttemptOutcome {
  int exit_code = 0;
  std::string reason;
  bool restartable = false;
  std::optional<FailureKind> failure_kind;
  std::vector<int> failed_nodes;
  long rescued_step = -1;
  std::vector<int> drop_nodes;
  long checkpoint_at_start = -1;
  long checkpoint_at_end = -1;
  // Failures the attempt recovered from in place and went on, by kind (job_runner.hpp reads them from the events).
  std::vector<FailureKind> in_place_recoveries;
  bool rejoin = false;  // the shell asked for the nodes left out back (job_outcome_msg::rejoin)
};

// The attempt as the job supervisor reported it: restartable when a node failed or was lost
// (exit code 1) or the job asked to drop nodes.
AttemptOutcome attempt_outcome(const job_outcome_msg& outcome);

// What the policy reads of the job's options, and the shape of this attempt (recovery_shape.hpp),
// whose rescue choice (recovery_path.hpp) says why a restart starts from the newest checkpoint.
struct RestartOptions {
  std::string checkpoint_dir;  // empty: nothing to restart from
  int max_restarts = 3;        // fault.max_restarts
  bool elastic = false;        // fault.elastic
  RecoveryShape shape;
};
RestartOptions restart_options(const JobConfig& config, const RecoveryShape& shape);

// A failure as a repeat is recognised: its kind and the nodes it names.
struct FailureSignature {
  FailureKind kind = FailureKind::node_exit;
  std::vector<int> nodes;
  bool operator==(const FailureSignature&) const = default;
};

// What the restart loop has been through: the counts it hands every node (restarts — those that
// used fault.max_restarts' budget, the one count of restarts the log, the shell and /metrics show —,
// failures by kind, recoveries by source: a shrink or a grow is a recovery, not a restart), the
// attempts that ended before this one (every restart of every node, whatever its reason), the
// failure the last restart answered (none after a shrink, whose nodes are numbered anew), and the
// nodes (by index in the next attempt) the last grow brought back: one that cannot come back is
// left out again, with fault.elastic or without, since only the shell's rejoin or a new spare line
// brought it.
struct RestartHistory {
  RecoveryCounts counts;
  int attempts_ended = 0;
  std::optional<FailureSignature> restarted_after;
  std::vector<int> rejoined;
};

// One node of the job, by node index, and how the global batch is made: what a shrink works on.
struct NodeShape {
  std::string host;
  int slots = 1;
};
struct BatchShape {
  int batch_size = 8;    // train.batch_size
  int grad_accum = 1;    // train.grad_accum
  int microbatches = 4;  // pipeline.microbatches
};
struct JobShape {
  std::vector<NodeShape> nodes;
  int stages = 1;  // pipeline.stages
  int shards = 1;  // tensor.shards
  BatchShape batch;
};

// The job after leaving nodes out: the node indices kept, the batch that keeps the global batch
// on the fewer data-parallel replicas, and the line that says how.
struct ShrinkPlan {
  std::vector<int> kept;
  BatchShape batch;
  std::string log_line;  // "shrinking from 3 to 2 data-parallel replica(s): train.batch_size = 12 keeps ..."
};

// Leaves `drop` (node indices) out of `job` and keeps the global batch on the fewer replicas that
// remain: more micro-batches per replica (train.grad_accum, or pipeline.microbatches with a
// pipeline), else a larger train.batch_size. A checkpoint refuses another global batch, so a
// shrink that cannot keep it is an error, as is one that leaves no node or a world the pipeline
// stages do not divide.
Expected<ShrinkPlan> plan_shrink(const JobShape& job, const std::vector<int>& drop);

// train.replica_speeds of the job that runs `running` (indices into `configured`, in rank order)
// under `configured_config`, whose key lists a speed for each replica of every configured line: each
// running replica keeps its line's speed (a shrink drops the speeds of the replicas it leaves out, a
// grow brings them back). Empty stays empty (the shares are even, or dynamic measures them).
std::string running_speeds(const JobConfig& configured_config, const std::vector<NodeShape>& configured,
                           const std::vector<int>& running);

// A line for the job's log, in order.
struct PolicyLine {
  enum class Level { info, warn, error };
  Level level = Level::info;
  std::string text;
};

struct RestartDecision {
  enum class Action { finish, stop, restart_from_replica, restart_from_checkpoint, shrink, grow };
  Action action = Action::finish;
  int exit_code = 0;                 // stop: the job's exit code; finish: 0
  std::string reason;                // stop: the one line after "troupe: error: "
  std::vector<int> drop;             // shrink: node indices left out
  std::string why_dropped;           // shrink: "it cannot come back", ...
  std::optional<ShrinkPlan> shrink;  // shrink: the nodes kept and the batch that keeps the global batch
  std::vector<PolicyLine> log;       // what to log, before acting
  // What the job does now, for a person (the log's text after "recovery: "): "restarting every node
  // from the newest checkpoint in ck (restart 1 of 3)"; "stopping the job: <counts>" for a stop
  // after restarts; empty for a finish or a stop without one.
  std::string recovery;
  RestartHistory next;               // the history after this attempt (counts, budget)
};

// After an attempt: finish, stop, restart (from the survivors' snapshot or the newest
// checkpoint), shrink, or grow back to every node of the host file. `history` is before this attempt; `job` is this attempt's nodes and batch.
RestartDecision decide_restart(const RestartHistory& history, const AttemptOutcome& attempt,
                               const RestartOptions& options, const JobShape& job);

std::string_view to_string(RestartDecision::Action action);

}  // namespace troupe::actors
