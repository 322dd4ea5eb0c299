// The restart policy (actors/supervision/restart_policy.hpp), one row per case: how an attempt
// ended, what the job had been through and its options → finish, stop, restart from the
// survivors' snapshot or the newest checkpoint, or shrink — with the exact log lines, the stop's
// one line and exit code, the counts handed to the next attempt and the batch a shrink keeps.
// The drills (tests/apps/commands/test_drill.cpp) grep the same lines from real jobs.

#include <catch2/catch.hpp>

#include <optional>
#include <string>
#include <vector>

#include "actors/supervision/restart_policy.hpp"

using namespace troupe::actors;
using Action = RestartDecision::Action;
using troupe::compute::ZeroStage;

namespace {

// The history after `text` (TROUPE_RESTARTS) and `attempts_ended` attempts, the last restart of
// which answered `restarted_after`.
RestartHistory history(const std::string& text = "", int attempts_ended = 0,
                       std::optional<FailureSignature> restarted_after = {}) {
  auto counts = RecoveryCounts::parse(text);
  REQUIRE(counts);
  return {*counts, attempts_ended, std::move(restarted_after)};
}

// Two replicas on the CPU backend with checkpoint.dir /ck; the shape's checkpoints follow the dir.
RestartOptions options(auto edit) {
  RestartOptions o{"/ck", 3, false, {}};
  o.shape.data_parallel = 2;
  edit(o);
  o.shape.checkpoints = !o.checkpoint_dir.empty();
  return o;
}
RestartOptions defaults() {
  return options([](RestartOptions&) {});
}

// Nodes a, b, c, … of `slots` each.
JobShape job(int nodes, int slots = 1, int stages = 1, BatchShape batch = {}) {
  JobShape shape;
  for (int i = 0; i < nodes; ++i) shape.nodes.push_back({std::string(1, static_cast<char>('a' + i)), slots});
  shape.stages = stages;
  shape.batch = batch;
  return shape;
}
JobShape two_nodes() { return job(2); }

AttemptOutcome failed(FailureKind kind, std::string reason, std::vector<int> nodes, long rescued_step = -1,
                      int exit_code = 1) {
  return {exit_code, std::move(reason), exit_code == 1, kind, std::move(nodes), rescued_step, {}};
}
AttemptOutcome lost_b(long rescued_step = -1) {
  return failed(FailureKind::node_lost, "lost node 1: gone", {1}, rescued_step);
}
AttemptOutcome drained_b() {
  return {1, "drain node 1: the shell asked to go on without it", true, FailureKind::drained, {1}, -1, {1}};
}
AttemptOutcome join_timeout_b() {
  return {2, "nodes 1 (b) did not join within 60.00 s", false, FailureKind::join_timeout, {1}, -1, {}};
}
AttemptOutcome start_failed_b() { return failed(FailureKind::start_failed, "node 1 (b) exited with code 1", {1}); }
// Node 1's worker fails (a full disk, a bug at one step) in an attempt that started from the
// checkpoint of step `from` and left the newest one at step `reached` (-1: none).
AttemptOutcome disk_full_b(long from, long reached, std::vector<int> nodes = {1}) {
  AttemptOutcome a = failed(FailureKind::worker_exception, "node 1 (b) failed: No space left on device", std::move(nodes));
  a.checkpoint_at_start = from;
  a.checkpoint_at_end = reached;
  return a;
}

struct Row {
  const char* name;
  // The input: what the job had been through, how the attempt ended, the options, the job.
  std::string counts_before = "restarts=0";  // TROUPE_RESTARTS before this attempt
  int attempts_before = 0;                   // attempts that ended before this one
  std::optional<FailureSignature> restarted_after = {};  // the failure the last restart answered
  AttemptOutcome attempt = {};
  RestartOptions options = defaults();
  JobShape job = two_nodes();
  // What the policy decides.
  Action action = Action::finish;
  int exit_code = 0;
  std::string reason = "";            // stop: the line after "troupe: error: "
  std::vector<std::string> log = {};  // "info: …", "warn: …", "error: …"
  std::string counts_after = "";      // the TROUPE_RESTARTS text for the next attempt
  int attempts_after = 0;
  std::vector<int> kept = {};            // shrink
  std::optional<BatchShape> batch = {};  // shrink
};

std::vector<Row> policy_rows() {
  const std::string lost = "failure 1 (node_lost) of node 1 (b): lost node 1: gone; recovery: restarting every node ";
  const std::string drained = "failure 1 (drained) of node 1 (b): drain node 1: the shell asked to go on without it; ";
  const std::string spent = "restarts=3 failure.node_lost=3 recovery.replica=3";
  const std::string restarted = "restarts=1 failure.node_lost=1 recovery.replica=1";
  auto elastic = [](RestartOptions& o) { o.elastic = true; };
  auto no_dir = [](RestartOptions& o) { o.checkpoint_dir = ""; };
  auto three_replicas = [](RestartOptions& o) { o.shape.data_parallel = 3; };
  return {
      {.name = "a first attempt that finished: nothing to say", .action = Action::finish, .counts_after = "restarts=0"},
      {.name = "a job that finished after restarts says how it went",
       .counts_before = restarted,
       .attempts_before = 1,
       .action = Action::finish,
       .log = {"info: job finished after 1 restart(s); " + restarted},
       .counts_after = restarted,
       .attempts_after = 1},
      // First failures, with budget left.
      {.name = "first failure with the survivors' snapshot: restart from the replica",
       .attempt = lost_b(5),
       .action = Action::restart_from_replica,
       .log = {"warn: " + lost +
               "from the survivors' rescue snapshot of step 5 (no steps lost) in /ck (restart 1 of 3)"},
       .counts_after = restarted,
       .attempts_after = 1},
      {.name = "first failure, no snapshot though one was allowed: restart from the checkpoint, no excuse",
       .attempt = failed(FailureKind::worker_exception, "node 1 (b) failed: boom; no rescue snapshot (x)", {1}),
       .action = Action::restart_from_checkpoint,
       .log = {"warn: failure 1 (worker_exception) of node 1 (b): node 1 (b) failed: boom; no rescue snapshot (x); "
               "recovery: restarting every node from the newest checkpoint in /ck (restart 1 of 3)"},
       .counts_after = "restarts=1 failure.worker_exception=1 recovery.checkpoint=1",
       .attempts_after = 1},
      {.name = "a stall names no node: restart from the checkpoint",
       .attempt = failed(FailureKind::stall, "no progress for 6.0 s", {}),
       .action = Action::restart_from_checkpoint,
       .log = {"warn: failure 1 (stall): no progress for 6.0 s; recovery: restarting every node from the newest "
               "checkpoint in /ck (restart 1 of 3)"},
       .counts_after = "restarts=1 failure.stall=1 recovery.checkpoint=1",
       .attempts_after = 1},
      {.name = "start_failed on the first attempt is a failure like any: restart from the checkpoint",
       .attempt = start_failed_b(),
       .action = Action::restart_from_checkpoint,
       .log = {"warn: failure 1 (start_failed) of node 1 (b): node 1 (b) exited with code 1; recovery: restarting "
               "every node from the newest checkpoint in /ck (restart 1 of 3)"},
       .counts_after = "restarts=1 failure.start_failed=1 recovery.checkpoint=1",
       .attempts_after = 1},
      {.name = "elastic with budget left: a plain restart, no shrink",
       .attempt = lost_b(5),
       .options = options(elastic),
       .action = Action::restart_from_replica,
       .log = {"warn: " + lost +
               "from the survivors' rescue snapshot of step 5 (no steps lost) in /ck (restart 1 of 3)"},
       .counts_after = restarted,
       .attempts_after = 1},
      // Why not from a replica.
      {.name = "train.zero 1: restart from the checkpoint, not a replica, saying why",
       .attempt = lost_b(),
       .options = options([](RestartOptions& o) { o.shape.zero = ZeroStage::optimizer_state; }),
       .action = Action::restart_from_checkpoint,
       .log =
           {"warn: " + lost +
            "from the newest checkpoint (no rescue: train.zero 1 shards the optimizer state: no replica holds a lost "
            "shard of the moments) in /ck (restart 1 of 3)"},
       .counts_after = "restarts=1 failure.node_lost=1 recovery.checkpoint=1",
       .attempts_after = 1},
      {.name = "a CUDA backend: restart from the checkpoint, saying why",
       .attempt = lost_b(),
       .options = options([](RestartOptions& o) { o.shape.device_backend = true; }),
       .action = Action::restart_from_checkpoint,
       .log = {"warn: " + lost +
               "from the newest checkpoint (no rescue: the state is in GPU memory, behind a stream an aborted NCCL "
               "communicator may block) in /ck (restart 1 of 3)"},
       .counts_after = "restarts=1 failure.node_lost=1 recovery.checkpoint=1",
       .attempts_after = 1},
      {.name = "a single data-parallel replica: restart from the checkpoint, saying why",
       .attempt = lost_b(),
       .options = options([](RestartOptions& o) { o.shape.data_parallel = 1; }),
       .job = job(2, 1, 2),
       .action = Action::restart_from_checkpoint,
       .log = {"warn: " + lost +
               "from the newest checkpoint (no rescue: a single data-parallel replica) in /ck (restart 1 of 3)"},
       .counts_after = "restarts=1 failure.node_lost=1 recovery.checkpoint=1",
       .attempts_after = 1},
      // The budget.
      {.name = "budget spent, not elastic: stop, naming the restarts",
       .counts_before = spent,
       .attempts_before = 3,
       .attempt = lost_b(5),
       .action = Action::stop,
       .exit_code = 1,
       .reason = "lost node 1: gone (after 3 restart(s); fault.elastic is off)",
       .log = {"error: failure 4 (node_lost) of node 1 (b): lost node 1: gone; recovery: stopping the job: restarts=3 "
               "failure.node_lost=4 recovery.replica=3"},
       .counts_after = "restarts=3 failure.node_lost=4 recovery.replica=3",
       .attempts_after = 3},
      {.name = "fault.max_restarts 0 with checkpoint.dir: stop at the first failure",
       .attempt = lost_b(5),
       .options = options([](RestartOptions& o) { o.max_restarts = 0; }),
       .action = Action::stop,
       .exit_code = 1,
       .reason = "lost node 1: gone (after 0 restart(s); fault.elastic is off)",
       .log = {"error: failure 1 (node_lost) of node 1 (b): lost node 1: gone; recovery: stopping the job: restarts=0 "
               "failure.node_lost=1"},
       .counts_after = "restarts=0 failure.node_lost=1"},
      {.name = "budget spent + elastic: shrink without the failed node, the budget untouched",
       .counts_before = spent,
       .attempts_before = 3,
       .attempt = lost_b(5),
       .options = options([](RestartOptions& o) {
         o.elastic = true;
         o.shape.data_parallel = 3;
       }),
       .job = job(3, 1, 1, {8, 2, 4}),
       .action = Action::shrink,
       .log = {"info: shrinking from 3 to 2 data-parallel replica(s): train.grad_accum = 3 keeps the global batch",
               "warn: failure 4 (node_lost) of node 1 (b): lost node 1: gone; recovery: restarting every node "
               "without node 1 (b) (the restart budget is spent), 2 node(s) left, from the newest checkpoint in /ck"},
       .counts_after = "restarts=3 failure.node_lost=4 recovery.replica=3 recovery.shrink=1",
       .attempts_after = 4,
       .kept = {0, 2},
       .batch = BatchShape{8, 3, 4}},
      {.name = "budget spent + elastic, but a stall names no node to drop: stop",
       .counts_before = "restarts=3 failure.stall=3 recovery.checkpoint=3",
       .attempts_before = 3,
       .attempt = failed(FailureKind::stall, "no progress", {}),
       .options = options(elastic),
       .action = Action::stop,
       .exit_code = 1,
       .reason = "no progress (after 3 restart(s))",
       .log = {"error: failure 4 (stall): no progress; recovery: stopping the job: restarts=3 failure.stall=4 "
               "recovery.checkpoint=3"},
       .counts_after = "restarts=3 failure.stall=4 recovery.checkpoint=3",
       .attempts_after = 3},
      // Repeats: the failure the last restart answered, again, with no newer checkpoint.
      {.name = "the same failure again and no checkpoint written: stop instead of training from scratch again",
       .counts_before = "restarts=1 failure.worker_exception=1 recovery.checkpoint=1",
       .attempts_before = 1,
       .restarted_after = FailureSignature{FailureKind::worker_exception, {1}},
       .attempt = disk_full_b(-1, -1),
       .action = Action::stop,
       .exit_code = 1,
       .reason = "node 1 (b) failed: No space left on device (after 1 restart(s); the same failure again, and no "
                 "checkpoint was written: another restart would repeat it)",
       .log = {"error: failure 2 (worker_exception) of node 1 (b): node 1 (b) failed: No space left on device; "
               "recovery: stopping the job: restarts=1 failure.worker_exception=2 recovery.checkpoint=1"},
       .counts_after = "restarts=1 failure.worker_exception=2 recovery.checkpoint=1",
       .attempts_after = 1},
      {.name = "the same failure again and no checkpoint after the one it started from: stop, naming its step",
       .counts_before = "restarts=1 failure.worker_exception=1 recovery.checkpoint=1",
       .attempts_before = 1,
       .restarted_after = FailureSignature{FailureKind::worker_exception, {1}},
       .attempt = disk_full_b(40, 40),
       .options = options(elastic),
       .action = Action::stop,
       .exit_code = 1,
       .reason = "node 1 (b) failed: No space left on device (after 1 restart(s); the same failure again, and no "
                 "checkpoint after step 40 was written: another restart would repeat it)",
       .log = {"error: failure 2 (worker_exception) of node 1 (b): node 1 (b) failed: No space left on device; "
               "recovery: stopping the job: restarts=1 failure.worker_exception=2 recovery.checkpoint=1"},
       .counts_after = "restarts=1 failure.worker_exception=2 recovery.checkpoint=1",
       .attempts_after = 1},
      {.name = "the same failure from nodes reported in another order is still a repeat",
       .counts_before = "restarts=1 failure.worker_exception=1 recovery.checkpoint=1",
       .attempts_before = 1,
       .restarted_after = FailureSignature{FailureKind::worker_exception, {0, 1}},
       .attempt = disk_full_b(-1, -1, {1, 0}),
       .action = Action::stop,
       .exit_code = 1,
       .reason = "node 1 (b) failed: No space left on device (after 1 restart(s); the same failure again, and no "
                 "checkpoint was written: another restart would repeat it)",
       .log = {"error: failure 2 (worker_exception) of node 1 (b), node 0 (a): node 1 (b) failed: No space left on "
               "device; recovery: stopping the job: restarts=1 failure.worker_exception=2 recovery.checkpoint=1"},
       .counts_after = "restarts=1 failure.worker_exception=2 recovery.checkpoint=1",
       .attempts_after = 1},
      {.name = "the same failure after a newer checkpoint: restart, the attempt got further",
       .counts_before = "restarts=1 failure.worker_exception=1 recovery.checkpoint=1",
       .attempts_before = 1,
       .restarted_after = FailureSignature{FailureKind::worker_exception, {1}},
       .attempt = disk_full_b(40, 60),
       .action = Action::restart_from_checkpoint,
       .log = {"warn: failure 2 (worker_exception) of node 1 (b): node 1 (b) failed: No space left on device; "
               "recovery: restarting every node from the newest checkpoint in /ck (restart 2 of 3)"},
       .counts_after = "restarts=2 failure.worker_exception=2 recovery.checkpoint=2",
       .attempts_after = 2},
      {.name = "the same failure answered by a rescue snapshot: restart from it, the attempt got further",
       .counts_before = restarted,
       .attempts_before = 1,
       .restarted_after = FailureSignature{FailureKind::node_lost, {1}},
       .attempt = lost_b(5),
       .action = Action::restart_from_replica,
       .log = {"warn: failure 2 (node_lost) of node 1 (b): lost node 1: gone; recovery: restarting every node from "
               "the survivors' rescue snapshot of step 5 (no steps lost) in /ck (restart 2 of 3)"},
       .counts_after = "restarts=2 failure.node_lost=2 recovery.replica=2",
       .attempts_after = 2},
      {.name = "another kind of failure with no newer checkpoint: restart, it may not come again",
       .counts_before = "restarts=1 failure.hang=1 recovery.checkpoint=1",
       .attempts_before = 1,
       .restarted_after = FailureSignature{FailureKind::hang, {1}},
       .attempt = disk_full_b(-1, -1),
       .action = Action::restart_from_checkpoint,
       .log = {"warn: failure 2 (worker_exception) of node 1 (b): node 1 (b) failed: No space left on device; "
               "recovery: restarting every node from the newest checkpoint in /ck (restart 2 of 3)"},
       .counts_after = "restarts=2 failure.hang=1 failure.worker_exception=1 recovery.checkpoint=2",
       .attempts_after = 2},
      {.name = "the same kind on another node with no newer checkpoint: restart",
       .counts_before = "restarts=1 failure.worker_exception=1 recovery.checkpoint=1",
       .attempts_before = 1,
       .restarted_after = FailureSignature{FailureKind::worker_exception, {0}},
       .attempt = disk_full_b(-1, -1),
       .action = Action::restart_from_checkpoint,
       .log = {"warn: failure 2 (worker_exception) of node 1 (b): node 1 (b) failed: No space left on device; "
               "recovery: restarting every node from the newest checkpoint in /ck (restart 2 of 3)"},
       .counts_after = "restarts=2 failure.worker_exception=2 recovery.checkpoint=2",
       .attempts_after = 2},
      {.name = "a first failure without any checkpoint restarts: it is not yet known to repeat",
       .attempt = disk_full_b(-1, -1),
       .action = Action::restart_from_checkpoint,
       .log = {"warn: failure 1 (worker_exception) of node 1 (b): node 1 (b) failed: No space left on device; "
               "recovery: restarting every node from the newest checkpoint in /ck (restart 1 of 3)"},
       .counts_after = "restarts=1 failure.worker_exception=1 recovery.checkpoint=1",
       .attempts_after = 1},
      // Nodes that cannot come back.
      {.name = "start_failed after a restart, not elastic: stop, the node cannot come back",
       .counts_before = restarted,
       .attempts_before = 1,
       .attempt = start_failed_b(),
       .action = Action::stop,
       .exit_code = 1,
       .reason =
           "node 1 (b) exited with code 1 (after 1 restart(s); node 1 (b) cannot come back; fault.elastic is off)",
       .log =
           {"error: failure 2 (start_failed) of node 1 (b): node 1 (b) exited with code 1; recovery: stopping the job: "
            "restarts=1 failure.node_lost=1 failure.start_failed=1 recovery.replica=1"},
       .counts_after = "restarts=1 failure.node_lost=1 failure.start_failed=1 recovery.replica=1",
       .attempts_after = 1},
      {.name = "start_failed after a restart + elastic: shrink without it (the node-lost drill)",
       .counts_before = restarted,
       .attempts_before = 1,
       .attempt = start_failed_b(),
       .options = options(elastic),
       .action = Action::shrink,
       .log = {"info: shrinking from 2 to 1 data-parallel replica(s): train.grad_accum = 2 keeps the global batch",
               "warn: failure 2 (start_failed) of node 1 (b): node 1 (b) exited with code 1; recovery: restarting "
               "every node without node 1 (b) (it cannot come back), 1 node(s) left, from the newest checkpoint in "
               "/ck"},
       .counts_after = "restarts=1 failure.node_lost=1 failure.start_failed=1 recovery.replica=1 recovery.shrink=1",
       .attempts_after = 2,
       .kept = {0},
       .batch = BatchShape{8, 2, 4}},
      {.name = "join_timeout on the first attempt is bad input: stop with its code, nothing counted",
       .attempt = join_timeout_b(),
       .action = Action::stop,
       .exit_code = 2,
       .reason = "nodes 1 (b) did not join within 60.00 s",
       .counts_after = "restarts=0"},
      {.name = "join_timeout after a restart: the node cannot come back, stop with its code",
       .counts_before = restarted,
       .attempts_before = 1,
       .attempt = join_timeout_b(),
       .action = Action::stop,
       .exit_code = 2,
       .reason = "nodes 1 (b) did not join within 60.00 s (after 1 restart(s); node 1 (b) cannot come back; "
                 "fault.elastic is off)",
       .log = {"error: failure 2 (join_timeout) of node 1 (b): nodes 1 (b) did not join within 60.00 s; recovery: stopping "
               "the job: restarts=1 failure.join_timeout=1 failure.node_lost=1 recovery.replica=1"},
       .counts_after = "restarts=1 failure.join_timeout=1 failure.node_lost=1 recovery.replica=1",
       .attempts_after = 1},
      // Drained nodes.
      {.name = "a drained node: shrink at once, without fault.elastic, the budget untouched",
       .attempt = drained_b(),
       .action = Action::shrink,
       .log = {"info: shrinking from 2 to 1 data-parallel replica(s): train.grad_accum = 2 keeps the global batch",
               "warn: " + drained +
                   "recovery: restarting every node without node 1 (b) (the job asked to drop it), 1 node(s) left, "
                   "from the newest checkpoint in /ck"},
       .counts_after = "restarts=0 failure.drained=1 recovery.shrink=1",
       .attempts_after = 1,
       .kept = {0},
       .batch = BatchShape{8, 2, 4}},
      {.name = "a drain with the budget spent still shrinks",
       .counts_before = "restarts=3 failure.hang=3 recovery.checkpoint=3",
       .attempts_before = 3,
       .attempt = drained_b(),
       .action = Action::shrink,
       .log = {"info: shrinking from 2 to 1 data-parallel replica(s): train.grad_accum = 2 keeps the global batch",
               "warn: failure 4 (drained) of node 1 (b): drain node 1: the shell asked to go on without it; recovery: "
               "restarting every node without node 1 (b) (the job asked to drop it), 1 node(s) left, from the "
               "newest checkpoint in /ck"},
       .counts_after = "restarts=3 failure.drained=1 failure.hang=3 recovery.checkpoint=3 recovery.shrink=1",
       .attempts_after = 4,
       .kept = {0},
       .batch = BatchShape{8, 2, 4}},
      // No checkpoint.dir.
      {.name = "a drain without checkpoint.dir: stop, saying why not",
       .attempt = drained_b(),
       .options = options(no_dir),
       .action = Action::stop,
       .exit_code = 1,
       .reason = "drain node 1: the shell asked to go on without it",
       .log = {"warn: not restarting: no checkpoint.dir to restart from"},
       .counts_after = "restarts=0 failure.drained=1"},
      {.name = "a node lost without checkpoint.dir: stop, saying why not",
       .attempt = lost_b(),
       .options = options(no_dir),
       .action = Action::stop,
       .exit_code = 1,
       .reason = "lost node 1: gone",
       .log = {"warn: not restarting: no checkpoint.dir to restart from"},
       .counts_after = "restarts=0 failure.node_lost=1"},
      {.name = "no checkpoint.dir and fault.max_restarts 0: stop without a word",
       .attempt = lost_b(),
       .options = options([](RestartOptions& o) {
         o.checkpoint_dir = "";
         o.max_restarts = 0;
       }),
       .action = Action::stop,
       .exit_code = 1,
       .reason = "lost node 1: gone",
       .counts_after = "restarts=0 failure.node_lost=1"},
      // Ends that no restart can help.
      {.name = "Ctrl-C is no failure to restart from: stop with its code, nothing counted",
       .attempt = {130, "interrupted (SIGINT)", false, std::nullopt, {}, -1, {}},
       .action = Action::stop,
       .exit_code = 130,
       .reason = "interrupted (SIGINT)",
       .counts_after = "restarts=0"},
      {.name = "the launcher could not start the nodes (no kind named): stop with its code",
       .attempt = {3, "pre-flight: no answer within 10.0 s", false, std::nullopt, {}, -1, {}},
       .action = Action::stop,
       .exit_code = 3,
       .reason = "pre-flight: no answer within 10.0 s",
       .counts_after = "restarts=0"},
      {.name = "one of the job's nodes runs another build (rejected): stop with exit code 2",
       .attempt = {2, "node 1 (b, pid 7) cannot join: build x differs", false, FailureKind::rejected, {1}, -1, {}},
       .action = Action::stop,
       .exit_code = 2,
       .reason = "node 1 (b, pid 7) cannot join: build x differs",
       .counts_after = "restarts=0"},
      // The shrink's arithmetic.
      {.name = "a shrink that keeps the global batch by train.batch_size",
       .attempt = drained_b(),
       .options = options(three_replicas),
       .job = job(3, 1, 1, {8, 1, 4}),
       .action = Action::shrink,
       .log = {"info: shrinking from 3 to 2 data-parallel replica(s): train.batch_size = 12 keeps the global batch",
               "warn: " + drained +
                   "recovery: restarting every node without node 1 (b) (the job asked to drop it), 2 node(s) left, "
                   "from the newest checkpoint in /ck"},
       .counts_after = "restarts=0 failure.drained=1 recovery.shrink=1",
       .attempts_after = 1,
       .kept = {0, 2},
       .batch = BatchShape{12, 1, 4}},
      {.name = "a pipeline's shrink keeps the global batch by pipeline.microbatches",
       .attempt = drained_b(),
       .options = options(three_replicas),
       .job = job(3, 2, 2, {8, 1, 4}),
       .action = Action::shrink,
       .log = {"info: shrinking from 3 to 2 data-parallel replica(s): pipeline.microbatches = 6 keeps the global "
               "batch",
               "warn: " + drained +
                   "recovery: restarting every node without node 1 (b) (the job asked to drop it), 2 node(s) left, "
                   "from the newest checkpoint in /ck"},
       .counts_after = "restarts=0 failure.drained=1 recovery.shrink=1",
       .attempts_after = 1,
       .kept = {0, 2},
       .batch = BatchShape{8, 1, 6}},
      {.name = "a shrink that cannot keep the global batch: stop, naming the node and the arithmetic",
       .attempt = drained_b(),
       .options = options(three_replicas),
       .job = job(3, 1, 1, {5, 1, 4}),
       .action = Action::stop,
       .exit_code = 1,
       .reason = "drain node 1: the shell asked to go on without it; cannot go on without node 1 (b): the global "
                 "batch (3 replicas x train.batch_size 5 x train.grad_accum 1) cannot be split over 2 replicas",
       .counts_after = "restarts=0 failure.drained=1"},
      {.name = "a shrink leaving a world the pipeline stages do not divide: stop",
       .attempt = drained_b(),
       .job = job(4, 1, 2),
       .action = Action::stop,
       .exit_code = 1,
       .reason = "drain node 1: the shell asked to go on without it; cannot go on without node 1 (b): 3 workers "
                 "would be left, which pipeline.stages 2 does not divide",
       .counts_after = "restarts=0 failure.drained=1"},
      {.name = "a shrink leaving no node: stop",
       .attempt = {1, "drain node 0: the shell asked to go on without it", true, FailureKind::drained, {0}, -1, {0}},
       .job = job(1),
       .action = Action::stop,
       .exit_code = 1,
       .reason = "drain node 0: the shell asked to go on without it; cannot go on without node 0 (a): no node would "
                 "be left",
       .counts_after = "restarts=0 failure.drained=1"},
  };
}

std::string text_of(const PolicyLine& line) {
  switch (line.level) {
    case PolicyLine::Level::info: return "info: " + line.text;
    case PolicyLine::Level::warn: return "warn: " + line.text;
    case PolicyLine::Level::error: return "error: " + line.text;
  }
  return line.text;
}

}  // namespace

TEST_CASE("the restart policy, case by case", "[recovery]") {
  for (const Row& row : policy_rows()) {
    INFO("row: " << row.name);
    const RestartDecision d = decide_restart(history(row.counts_before, row.attempts_before, row.restarted_after),
                                             row.attempt, row.options, row.job);
    CHECK(to_string(d.action) == to_string(row.action));
    CHECK(d.exit_code == row.exit_code);
    CHECK(d.reason == row.reason);
    std::vector<std::string> log;
    for (const PolicyLine& line : d.log) log.push_back(text_of(line));
    CHECK(log == row.log);
    CHECK(d.next.counts.to_text() == row.counts_after);
    CHECK(d.next.attempts_ended == row.attempts_after);
    // A restart remembers the failure it answers; a shrink renumbers the nodes and forgets it.
    std::optional<FailureSignature> remembered = row.restarted_after;
    if (row.action == Action::restart_from_checkpoint || row.action == Action::restart_from_replica)
      remembered = FailureSignature{*row.attempt.failure_kind, row.attempt.failed_nodes};
    if (row.action == Action::shrink) remembered.reset();
    CHECK(d.next.restarted_after == remembered);
    // No REQUIRE: a row that fails must not hide the rows after it.
    CHECK(d.shrink.has_value() == (row.action == Action::shrink));
    CHECK(row.batch.has_value() == (row.action == Action::shrink));
    if (d.shrink && row.batch) {
      CHECK(d.shrink->kept == row.kept);
      CHECK(d.shrink->batch.batch_size == row.batch->batch_size);
      CHECK(d.shrink->batch.grad_accum == row.batch->grad_accum);
      CHECK(d.shrink->batch.microbatches == row.batch->microbatches);
    }
  }
}

TEST_CASE("the job supervisor's outcome is restartable when a node failed or the job asked to drop one", "[recovery]") {
  const AttemptOutcome lost = attempt_outcome({1, "lost", FailureKind::node_lost, {1}, 5, {}});
  CHECK((lost.restartable && lost.failure_kind == FailureKind::node_lost && lost.rescued_step == 5));
  const AttemptOutcome late = attempt_outcome({2, "late", FailureKind::join_timeout, {1}, -1, {}});
  CHECK((!late.restartable && late.failure_kind == FailureKind::join_timeout && late.failed_nodes == std::vector{1}));
  const AttemptOutcome drained = attempt_outcome({1, "drain", FailureKind::drained, {1}, -1, {1}});
  CHECK((drained.restartable && drained.drop_nodes == std::vector{1}));
  CHECK(!attempt_outcome({0, "all done", FailureKind::node_exit, {}, -1, {}}).failure_kind);
}

TEST_CASE("an attempt's in-place recoveries go into the counts a restart hands the nodes, and the finished job's line",
          "[recovery]") {
  RestartOptions options;
  options.checkpoint_dir = "ck";
  options.shape.data_parallel = 2;
  options.shape.checkpoints = true;
  const JobShape job{{{"a", 1}, {"b", 1}}};
  AttemptOutcome lost = attempt_outcome({1, "lost node 1", FailureKind::node_lost, {1}, 7, {}});
  lost.in_place_recoveries = {FailureKind::worker_exception, FailureKind::worker_exception};
  lost.checkpoint_at_end = 7;
  const RestartDecision restart = decide_restart({}, lost, options, job);
  CHECK(restart.action == RestartDecision::Action::restart_from_replica);
  CHECK(restart.next.counts.to_text() ==
        "restarts=1 failure.node_lost=1 failure.worker_exception=2 recovery.in_place=2 recovery.replica=1");
  // A lost node replaced in place counts as node_lost, a silent one as hang.
  AttemptOutcome done = attempt_outcome({0, "done", FailureKind::node_exit, {}, -1, {}});
  done.in_place_recoveries = {FailureKind::node_lost, FailureKind::hang};
  const RestartDecision finished = decide_restart(restart.next, done, options, job);
  CHECK(finished.action == RestartDecision::Action::finish);
  REQUIRE(!finished.log.empty());
  CHECK(finished.log.back().text ==
        "job finished after 1 restart(s); restarts=1 failure.hang=1 failure.node_lost=2 failure.worker_exception=2 "
        "recovery.in_place=4 recovery.replica=1");
}

TEST_CASE("restart options read the job's keys, and the job's shape: the replicas are the workers over the stages",
          "[recovery]") {
  JobConfig config;
  config.checkpoint.dir = "/ck";
  config.fault.max_restarts = 5;
  config.fault.elastic = true;
  config.fault.recovery = RecoveryMode::restart;
  config.train.zero = ZeroStage::optimizer_state;
  config.train.backend = troupe::compute::BackendKind::cuda;
  config.pipeline.stages = 2;
  config.comm.compress = troupe::comm::Compression::powersgd;
  const RestartOptions o = restart_options(config, recovery_shape(config, 6, true));
  CHECK((o.checkpoint_dir == "/ck" && o.max_restarts == 5 && o.elastic));
  CHECK((o.shape.mode == RecoveryMode::restart && o.shape.zero == ZeroStage::optimizer_state && o.shape.device_backend &&
         o.shape.data_parallel == 3 && o.shape.pipeline_stages == 2 &&
         o.shape.compression == troupe::comm::Compression::powersgd && o.shape.replaces_nodes && o.shape.checkpoints));
}

TEST_CASE(
    "the shell's rejoin grows the job back to every node of its host file, as a restart that is no failure "
    "and uses no budget",
    "[recovery]") {
  RestartOptions options;
  options.checkpoint_dir = "ck";
  const JobShape job{{{"a", 1}}};
  RestartHistory history;
  history.counts.restarts = 1;
  history.attempts_ended = 1;
  AttemptOutcome rejoin = attempt_outcome({1, "rejoin: the shell asked", FailureKind::node_exit, {}, -1, {}, true});
  CHECK(rejoin.rejoin);
  const RestartDecision grow = decide_restart(history, rejoin, options, job);
  CHECK(grow.action == RestartDecision::Action::grow);
  CHECK(grow.next.counts.to_text() == "restarts=1 recovery.grow=1");
  CHECK(grow.next.attempts_ended == 2);
  REQUIRE(grow.log.size() == 1);
  CHECK(grow.log[0].text == "recovery: restarting every node with the nodes the job went on without (the shell's "
                            "rejoin), from the newest checkpoint in ck");
  // A node the grow brought back that fails before joining is left out again, without
  // fault.elastic too; any other node that cannot come back still stops the job.
  RestartHistory grown = grow.next;
  grown.rejoined = {1};
  const AttemptOutcome failed_start = attempt_outcome({1, "node 1 exited", FailureKind::start_failed, {1}, -1, {}});
  const JobShape two{{{"a", 1}, {"b", 1}}};
  const RestartDecision again = decide_restart(grown, failed_start, options, two);
  CHECK(again.action == RestartDecision::Action::shrink);
  CHECK(again.drop == std::vector<int>{1});
  CHECK(again.why_dropped == "it could not rejoin");
  CHECK(again.next.rejoined.empty());
  const RestartDecision stop = decide_restart(grow.next, failed_start, options, two);
  CHECK(stop.action == RestartDecision::Action::stop);
  options.elastic = true;
  CHECK(decide_restart(grow.next, failed_start, options, two).why_dropped == "it cannot come back");
}

TEST_CASE("a shrink keeps the speeds of the replicas left and a grow brings back those of the lines that return",
          "[recovery][balance]") {
  JobConfig config;
  const std::vector<NodeShape> lines{{"a", 1}, {"b", 2}, {"c", 1}};
  config.train.replica_speeds = "1,0.5,0.25,2";  // a; b's two ranks; c
  CHECK(running_speeds(config, lines, {0, 1, 2}) == "1,0.5,0.25,2");
  CHECK(running_speeds(config, lines, {0, 2}) == "1,2");
  CHECK(running_speeds(config, lines, {1}) == "0.5,0.25");
  // A grow appends the lines back after those running, and ranks follow that order.
  CHECK(running_speeds(config, lines, {0, 2, 1}) == "1,2,0.5,0.25");
  // Tensor shards: a replica is 2 consecutive ranks, its speed listed once.
  config.tensor.shards = 2;
  config.train.replica_speeds = "1,0.5";
  const std::vector<NodeShape> pairs{{"a", 2}, {"b", 2}};
  CHECK(running_speeds(config, pairs, {1}) == "0.5");
  CHECK(running_speeds(config, pairs, {1, 0}) == "0.5,1");
  // No speeds: none.
  config.train.replica_speeds.clear();
  CHECK(running_speeds(config, lines, {0}).empty());
}
