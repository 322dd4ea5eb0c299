// Failure drills as a user runs them: `troupe drill SCENARIO` on tiny, each with its verdict. A
// drill passes only when the fault was detected, training went on (the failed worker respawned in
// its process with every node keeping its pid, the lost node's process alone started again with
// every other node keeping its pid — its state from a replica, or, without one, every rank rolled
// back in its own process to the newest checkpoint —, every node restarted from the survivors'
// rescue snapshot or the newest checkpoint, or a failed save was survived) and the
// final parameters and AdamW moments equal an undisturbed run's bitwise (node-lost: the job went
// on without the node, and from 2 replicas to 1 still bitwise).

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <regex>

#include "actors/job_events.hpp"
#include "apps/commands/drill/drill.hpp"
#include "apps/drill_outcome.hpp"
#include "apps/run_troupe.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"
#include "support/run_process.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;

namespace {

ProcessResult drill(const TempDir& dir, const std::string& scenario, std::vector<std::string> extra = {},
                    std::chrono::seconds timeout = std::chrono::seconds(240)) {
  std::vector<std::string> args{"drill",           scenario,           "--dir",
                                (dir.path() / scenario).string(),    "--model.preset",   "tiny",
                                "--train.steps",  "12",              "--train.threads",  "1",
                                "--train.val_batches", "1",          "--train.val_every", "0"};
  if (std::find(extra.begin(), extra.end(), "--at-step") == extra.end()) args.insert(args.end(), {"--at-step", "5"});
  args.insert(args.end(), extra.begin(), extra.end());
  const ProcessResult r = run_troupe(dir, args, timeout);
  // The verdict, or all of it where the drill ended before its fault.
  const std::size_t verdict = r.out.find("drill " + scenario + ":");
  std::printf("%s%s", r.out.substr(verdict == std::string::npos ? 0 : verdict).c_str(), r.err.c_str());
  return r;
}

double seconds_after(const std::string& out, const std::string& what) {
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex(what + " after ([0-9.]+) s")));
  return std::stod(m[1].str());
}

// What a run left in `folder`, by name.
std::vector<std::string> entries(const std::filesystem::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) names.push_back(entry.path().filename());
  return names;
}

// The bytes of state an in-place recovery moved, as the verdict says them.
long long state_bytes_moved(const std::string& out) {
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex("state moved over the data plane: ([0-9]+) bytes from rank 0")));
  return std::stoll(m[1].str());
}

// Killed mid-step, the surviving replicas may stand a step apart (replica 0 finished the step,
// while the lost rank's partner in replica 1 waited for it in the step's gradient sum): no rescue
// snapshot of one step holds every (stage, shard) then, and the job restarts from the newest
// checkpoint instead, saying why at once. Returns whether the survivors stood at one step.
bool survivors_at_one_step(const ProcessResult& r) {
  if (r.out.find("the survivors hold different steps") == std::string::npos) return true;
  std::printf("the surviving replicas stood a step apart: restarted from the newest checkpoint\n");
  CHECK_THAT(r.out, Contains("recovered from a surviving replica's memory: no") &&
                        Contains("restarting every node from the newest checkpoint"));
  return false;
}

void check_passed(const ProcessResult& r) {
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("verdict: PASS") &&
                        Contains("final weights equal to an undisturbed run: yes (parameters and AdamW moments, bitwise)"));
}

}  // namespace

TEST_CASE("drill kill-node: a SIGKILLed node is detected within a second, only its process is started again, and it "
          "takes its state from the surviving replica over the data plane, losing no step",
          "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-node", {"--keep"});
  check_passed(r);
  if (kill_stalled_a_survivor(r.out)) return;
  CHECK_THAT(r.out, Contains("lost node 1") && Contains("steps lost: 0\n") &&
                        Contains("recovered from a surviving replica's memory: yes (in place, over the data plane)") &&
                        Contains("rank 1 in its node's new process, resumed from rank 0's memory") &&
                        Contains("survivors kept their processes: yes (node 0 pid ") &&
                        Contains("node 1's process started again: yes (pid ") && !Contains("restarting every node"));
  const auto params = troupe::compute::ParameterLayout(*troupe::compute::gpt_preset("tiny")).total();
  CHECK(state_bytes_moved(r.out) == 3 * 4 * params);
  CHECK(seconds_after(r.out, "detected") < 1.0);
  CHECK(seconds_after(r.out, "recovered") < 30.0);
  // Training resumes once the state has moved; the interrupted step then trains again.
  CHECK(seconds_after(r.out, "detected") <= seconds_after(r.out, "training resumed"));
  CHECK(seconds_after(r.out, "training resumed") <= seconds_after(r.out, "recovered"));
  // The new process takes the lost one's MFU basis instead of measuring sgemm before it joins.
  const std::string log = file_text(dir.path() / "kill-node" / "drilled.log");
  std::smatch measured, inherited;
  REQUIRE(std::regex_search(log, measured,
                            std::regex("\\[node 1 [^\\]]*\\].*MFU over ([0-9.]+) GFLOP/s a rank \\(OpenBLAS sgemm, measured\\)")));
  REQUIRE(std::regex_search(
      log, inherited,
      std::regex("\\[node 1 [^\\]]*\\].*MFU over ([0-9.]+) GFLOP/s a rank \\(measured by the process this one replaces\\)")));
  CHECK(inherited[1].str() == measured[1].str());
}

TEST_CASE(
    "a rebuild during a drill changes nothing: its runs, their node processes and the lost node's new process "
    "are the build that started, not the file now at its path",
    "[drill]") {
  TempDir dir;
  std::filesystem::copy_file(TROUPE_BINARY_DIR "/troupe", dir.path() / "troupe");
  // Once the drill has begun, another program takes the binary's path, as `cmake --build` would.
  const std::string script =
      "./troupe drill kill-node --dir kn --model.preset tiny --train.steps 12 --train.threads 1 --train.val_batches 1 "
      "--train.val_every 0 --at-step 5 > drill.txt 2>&1 & drill=$!\n"
      "until [ -s drill.txt ]; do sleep 0.05; done\n"
      "printf '#!/bin/sh\\necho a newer build started >&2\\nexit 3\\n' > troupe.new && chmod +x troupe.new && "
      "mv troupe.new troupe\n"
      "wait $drill; status=$?; cat drill.txt; exit $status\n";
  const ProcessResult r = run_process({"/bin/sh", "-c", script}, dir.path().string(), std::chrono::seconds(240));
  std::printf("%s%s", r.out.c_str(), r.err.c_str());
  check_passed(r);
  CHECK_THAT(r.out, Contains("node 1's process started again: yes (pid ") && !Contains("a newer build started"));
}

// A DiLoCo drill on two islands of one rank each (`drill`: kill-node or kill-worker on rank 1): the
// job ends well, island 1 is left out of the next sync and only node 1's process is started again.
ProcessResult island_drill(const TempDir& dir, const std::string& drill_name) {
  ProcessResult r =
      drill(dir, drill_name, {"--train.sync", "diloco", "--train.islands", "2", "--train.diloco_steps", "2"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("verdict: PASS") && Contains("recovery: island 1 left out (epoch 1): island 0 goes on") &&
                        Contains("survivors kept their processes: yes (node 0 pid ") &&
                        Contains("node 1's process started again: yes (pid ") &&
                        Contains("final weights: not compared with the undisturbed run's") &&
                        !Contains("restarting every node"));
  return r;
}

TEST_CASE(
    "drill kill-node on two DiLoCo islands: the lost island is left out of the next sync, only its node's "
    "process is started again, and it rejoins with the outer state",
    "[drill][diloco]") {
  TempDir dir;
  const ProcessResult r = island_drill(dir, "kill-node");
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  // Killed after step 5: island 0 takes the next sync alone (after step 6, or 8 where the killed
  // process had taken the one after step 6 before the signal came), and island 1 rejoins there.
  std::smatch rejoined;
  REQUIRE(std::regex_search(r.out, rejoined,
                            std::regex("the lost island rejoined after step ([0-9]+) with rank 0's "
                                       "outer state")));
  const long after = std::stol(rejoined[1].str());
  CHECK((after == 6 || after == 8));
  CHECK_THAT(r.out, Contains("lost node 1") && Contains("recovered from a surviving replica's memory: no (DiLoCo") &&
                        Contains("rank 1 in its node's new process, resumed from rank 0's outer state and trained "
                                 "step " +
                                 std::to_string(after + 1)));
  CHECK(seconds_after(r.out, "detected") < 1.0);
}

// A worker that throws takes its island's weights with it as a lost node does: its node's process
// is started again and the island left out of the next sync, then rejoins.
TEST_CASE(
    "drill kill-worker on two DiLoCo islands: the thrower's node process is started again, its island left out of "
    "the next sync, and it rejoins with the outer state",
    "[drill][diloco]") {
  TempDir dir;
  const ProcessResult r = island_drill(dir, "kill-worker");
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK_THAT(r.out, Contains("drill: injected failure in the worker of rank 1") &&
                        Contains("rank 1 in its node's new process, resumed from rank 0's outer state") &&
                        Contains("the lost island rejoined after step "));
}

// Islands of two replicas: rank 1's throw loses island 0, rank 0's node with it. Both nodes start
// again and rejoin with the outer state of island 1's ranks, each from the rank at its place.
TEST_CASE(
    "drill kill-worker on two DiLoCo islands of two replicas: both nodes of the thrower's island start again, the "
    "other island's keep their processes and hand each new rank the outer state",
    "[drill][diloco]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-worker",
                                {"--workers", "4", "--train.batch_size", "2", "--train.sync", "diloco",
                                 "--train.islands", "2", "--train.diloco_steps", "2"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("verdict: PASS") &&
                        Contains("recovery: island 0 left out (epoch 1): island 1 goes on and takes the next outer "
                                 "sync without it; starting node 1's process again on its host localhost, node 0's "
                                 "process again on its host localhost (node 0 of the island lost, killed first), to "
                                 "rejoin after that sync with the outer state of ranks 2 and 3") &&
                        Contains("survivors kept their processes: yes (node 2 pid ") &&
                        Contains("node 0's process started again: yes (pid ") &&
                        Contains("node 1's process started again: yes (pid ") &&
                        Contains("the lost island rejoined after step ") &&
                        Contains("with ranks 2 and 3's outer state") && !Contains("restarting every node"));
}

TEST_CASE("drill kill-node on dp 3: both survivors keep their processes and connect to the new one", "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-node", {"--workers", "3", "--target", "2"});
  check_passed(r);
  if (kill_stalled_a_survivor(r.out)) return;
  CHECK_THAT(r.out, Contains("lost node 2") && Contains("steps lost: 0\n") &&
                        Contains("survivors kept their processes: yes (node 0 pid ") && Contains(", node 1 pid ") &&
                        Contains("node 2's process started again: yes (pid ") && !Contains("restarting every node"));
}

TEST_CASE("drill kill-node of two nodes at once on dp 3: one in-place recovery starts both processes again, the "
          "survivor keeps its process and gives both their state, losing no step",
          "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-node", {"--workers", "3", "--target", "1,2"});
  check_passed(r);
  if (kill_stalled_a_survivor(r.out)) return;
  CHECK_THAT(r.out, Contains("SIGKILL to nodes 1 and 2 (pids ") && Contains("steps lost: 0\n") &&
                        Contains("survivors kept their processes: yes (node 0 pid ") &&
                        Contains("node 1's process started again: yes (pid ") &&
                        Contains("node 2's process started again: yes (pid ") && !Contains("restarting every node"));
  // The second loss comes while the first one's recovery waits for its ranks: it widens that one.
  CHECK_THAT(r.out, Contains("recovery: in place (epoch 1) widened to node "));
  CHECK_THAT(r.out, Contains("(epoch 1): node 1's process started again on localhost (pid ") &&
                        Contains("node 2's process started again on localhost (pid ") &&
                        Contains("bytes of state from rank 0 over the data plane"));
  CHECK(occurrences(r.out, "recovery: in place done") == 1);
  const auto params = troupe::compute::ParameterLayout(*troupe::compute::gpt_preset("tiny")).total();
  CHECK(state_bytes_moved(r.out) == 2 * 3 * 4 * params);
}

TEST_CASE("drill kill-node with fault.recovery restart: every node restarts from the survivors' rescue snapshot, "
          "losing no step",
          "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-node", {"--fault.recovery", "restart"});
  check_passed(r);
  CHECK_THAT(r.out, Contains("lost node 1") && Contains("steps lost: 0\n") &&
                        Contains("recovered from a surviving replica's memory: yes") &&
                        Contains("recovery: restarting every node: fault.recovery is restart") &&
                        Contains("counted: restarts=1 failure.node_lost=1 recovery.replica=1"));
  // Killed after step 5: the survivor may still finish step 6 where the killed node had sent its
  // gradients before the signal came; either way the snapshot is the last step it finished.
  std::smatch snapshot;
  REQUIRE(std::regex_search(r.out, snapshot,
                            std::regex("from the survivors' rescue snapshot of step ([0-9]+) \\(no steps lost\\)")));
  CHECK((snapshot[1].str() == "5" || snapshot[1].str() == "6"));
  CHECK(seconds_after(r.out, "detected") < 1.0);
  CHECK(seconds_after(r.out, "training resumed") <= seconds_after(r.out, "recovered"));
}

// With rank 1 (shard 1 of replica 0, or the second place of the first expert group) lost, its
// shard or experts survive only on rank 3, shard 0's on ranks 0 and 2: the writer of shard 0 is
// whichever had finished more steps when the loss came, a race.
static bool asks_a_holder_of_each_shard(const std::string& out) {
  return std::regex_search(out, std::regex("asking rank\\(s\\) [02], 3 for a rescue snapshot"));
}

TEST_CASE("drill kill-node with tensor shards and fault.recovery restart: the replica of every (stage, shard) that "
          "survives writes the rescue snapshot, losing no step",
          "[drill][tensor]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-node", {"--workers", "4", "--tensor.shards", "2", "--train.batch_size", "4",
                                                   "--fault.recovery", "restart"});
  check_passed(r);
  CHECK_THAT(r.out, Contains("lost node 1") && Contains("tensor shard 1 of replica 0"));
  CHECK(asks_a_holder_of_each_shard(r.out));
  if (survivors_at_one_step(r))
    CHECK_THAT(r.out, Contains("steps lost: 0\n") && Contains("recovered from a surviving replica's memory: yes") &&
                          Contains("counted: restarts=1 failure.node_lost=1 recovery.replica=1"));
}

// Four workers in expert groups of 2: ranks 0 and 2 hold the first half of each MoE block's
// experts, ranks 1 and 3 the second. With node 1 lost, ranks 0 or 2 and rank 3 write the snapshot,
// which holds every expert once.
TEST_CASE(
    "drill kill-node with expert shards and fault.recovery restart: one survivor of each place in the expert "
    "group writes the rescue snapshot, losing no step",
    "[drill][moe]") {
  TempDir dir;
  const ProcessResult r =
      drill(dir, "kill-node",
            {"--workers", "4", "--model.preset", "moe-tiny", "--expert.shards", "2", "--fault.recovery", "restart"});
  check_passed(r);
  CHECK_THAT(r.out, Contains("lost node 1"));
  CHECK(asks_a_holder_of_each_shard(r.out));
  if (survivors_at_one_step(r))
    CHECK_THAT(r.out, Contains("steps lost: 0\n") && Contains("recovered from a surviving replica's memory: yes") &&
                          Contains("counted: restarts=1 failure.node_lost=1 recovery.replica=1"));
}

// Step 4 is checkpointed (every 2): the kill comes while the coordinator, rank 0, waits for the
// lost rank's shard of that save. The rescue order ends the wait, and rank 0, holding step 4,
// writes its rescue snapshot instead of giving up, so the restart loses no step. On a loaded
// machine the kill can land after every rank finished step 5 too: then the snapshot is of step 5,
// again losing no step; or after the lost rank wrote its shard of step 4, so that save commits and
// the survivors, asked for a snapshot of a step already saved, write none: the restart is from
// that checkpoint, again losing no step. In both the wait was not exercised (the test says so).
TEST_CASE("drill kill-node with tensor shards and fault.recovery restart right after a checkpointed step: the "
          "coordinator waiting for the lost rank's shard writes its rescue snapshot, losing no step",
          "[drill][tensor]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-node", {"--workers", "4", "--tensor.shards", "2", "--train.batch_size", "4",
                                                   "--fault.recovery", "restart", "--at-step", "4"});
  check_passed(r);
  CHECK(asks_a_holder_of_each_shard(r.out));
  if (!survivors_at_one_step(r)) return;
  CHECK_THAT(r.out, Contains("steps lost: 0\n"));
  if (r.out.find("rescue snapshot of step") == std::string::npos) {
    CHECK_THAT(r.out, Contains("restarting every node from the newest checkpoint") &&
                          Contains("every node restarted from " +
                                   (dir.path() / "kill-node" / "drilled" / "step-0000004").string()));
    std::printf(
        "the lost rank's shard of step 4 was written before the kill: the coordinator's wait was not exercised\n");
    return;
  }
  std::smatch snapshot;
  REQUIRE(std::regex_search(r.out, snapshot,
                            std::regex("restarting every node from the survivors' rescue snapshot of step\\s+([0-9]+) "
                                       "\\(no steps lost\\)")));
  const long step = std::stol(snapshot[1].str());
  CHECK(step >= 4);
  if (step > 4)
    std::printf("the kill landed after step %ld: the coordinator's wait for the lost shard was not exercised\n", step);
}

TEST_CASE("drill node-lost: a node that cannot come back is left out and the job finishes on fewer replicas, "
          "from 2 replicas to 1 with the weights of an undisturbed run",
          "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "node-lost");
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("verdict: PASS") && Contains("steps lost: 0\n") &&
                        Contains("the job went on without node 1: yes") &&
                        Contains("final weights equal to an undisturbed run: yes (parameters and AdamW moments, "
                                 "bitwise)") &&
                        Contains("recovery: restarting every node without node 1 (localhost) (it cannot come back)") &&
                        Contains("counted: restarts=1 failure.node_lost=1 failure.start_failed=1 recovery.replica=1 "
                                 "recovery.shrink=1"));
}

TEST_CASE(
    "drill node-lost under train.balance static: the job shrinks from 3 replicas to 2, which split the "
    "batch again by the speeds they keep",
    "[drill][balance][slow]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "node-lost",
                                {"--workers", "3", "--target", "2", "--keep", "--train.grad_accum", "4",
                                 "--train.balance", "static", "--train.replica_speeds", "1,0.25,1"});
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("verdict: PASS") && Contains("the job went on without node 2: yes") &&
                        Contains("final weights equal to an undisturbed run: yes (parameter norm ") &&
                        Contains("within 1e-06: uneven shares sum the gradients in another order)"));
  // 12 micro-batches a step: 5 + 2 + 5 by the speeds 1, 0.25, 1; replicas 0 and 1 left: 9 + 3 by 1, 0.25.
  const std::string log = file_text(dir.path() / "node-lost" / "drilled.log");
  CHECK(occurrences(log, "balance static: replica shares 5, 2, 5 of 12 micro-batches") >= 1);
  CHECK(occurrences(log, "balance static: replica shares 9, 3 of 12 micro-batches") >= 1);
}

TEST_CASE("drill grow: a drained node comes back into the running job, the survivor keeps its process, and the "
          "weights are an undisturbed run's",
          "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "grow", {"--train.steps", "40"});
  check_passed(r);
  CHECK_THAT(r.out, Contains("drill grow: drain node 1 after step 5, two steps without it, then rejoin") &&
                        Contains("rejoin: growing in place (epoch 1) from 1 to 2 ranks") &&
                        Contains("the job went on without node 1: yes") && Contains("grown in place: yes") &&
                        Contains("survivors kept their processes through the grow: yes (node 0 pid") &&
                        Contains("state moved over the data plane: 10109952 bytes from rank 0") &&
                        Contains("job finished: yes"));
}

TEST_CASE("a drill's verdict tells every failure after the drilled one with its kind and reason", "[drill]") {
  using namespace troupe::actors;
  const auto failure = [](FailureKind kind, std::string reason) {
    return job_event{.body = failure_detected{.kind = kind, .nodes = {1}, .ranks = {1}, .reason = std::move(reason)}};
  };
  const std::vector<job_event> events{failure(FailureKind::node_lost, "lost node 1"),
                                      job_event{.body = step_trained{.step = 6}},
                                      failure(FailureKind::worker_exception, "rank 0 failed: comm: closed")};
  troupe::apps::drill::Verdict v;
  troupe::apps::drill::add_later_failures(events, v);
  CHECK(v.checks == std::vector<std::string>{"also failed (worker_exception): rank 0 failed: comm: closed"});
  troupe::apps::drill::Verdict alone;
  troupe::apps::drill::add_later_failures({events.front()}, alone);
  CHECK(alone.checks.empty());
}

TEST_CASE("without fault.elastic a node that cannot come back stops the job, named, with the restarts used",
          "[drill]") {
  TempDir dir;
  // Rank 1 throws in step 3; node 1 then fails at every restart, as a machine that stays down.
  const ProcessResult r = run_process(
      {"/usr/bin/env", "TROUPE_DRILL_THROW_AT=1:3", "TROUPE_DRILL_NODE_GONE=1", TROUPE_BINARY_DIR "/troupe", "train",
       "--workers", "2", "--model.preset", "tiny", "--train.steps", "6", "--train.threads", "1", "--train.val_batches",
       "1", "--train.val_every", "0", "--sample.tokens", "0", "--checkpoint.dir", (dir.path() / "ckpt").string(),
       "--fault.recovery", "restart"},
      dir.path().string(), std::chrono::seconds(120));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("troupe: error: node 1 (localhost) exited with code 1 (after 1 restart(s); node 1 "
                             "(localhost) cannot come back; fault.elastic is off)"));
  CHECK_THAT(r.out, Contains("failure 1 (worker_exception) of node 1 (localhost)") &&
                        Contains("rescue snapshot of step 2 written") &&
                        Contains("stopping the job: restarts=1 failure.start_failed=1 failure.worker_exception=1 "
                                 "recovery.replica=1"));
}


TEST_CASE("drill kill-worker: the worker is respawned in its process and takes its state from the surviving replica "
          "over the data plane, losing no step",
          "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-worker");
  check_passed(r);
  CHECK_THAT(r.out, Contains("drill: injected failure in the worker of rank 1 at step 5") && Contains("steps lost: 0\n") &&
                        Contains("recovered from a surviving replica's memory: yes (in place, over the data plane)") &&
                        Contains("rank 1's worker respawned in its process, resumed from rank 0's memory") &&
                        Contains("every node kept its process: yes (node 0 pid ") &&
                        !Contains("restarting every node"));
  // Parameters and both AdamW moments of the whole model, as float32.
  const auto params = troupe::compute::ParameterLayout(*troupe::compute::gpt_preset("tiny")).total();
  CHECK(state_bytes_moved(r.out) == 3 * 4 * params);
  CHECK(seconds_after(r.out, "detected") < 1.0);
}

TEST_CASE("drill kill-worker with fault.recovery restart: every node restarts from the survivors' rescue snapshot, "
          "and the log says why",
          "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-worker", {"--fault.recovery", "restart"});
  check_passed(r);
  CHECK_THAT(r.out, Contains("recovery: restarting every node: fault.recovery is restart") &&
                        Contains("steps lost: 0\n") && Contains("recovered from a surviving replica's memory: yes\n") &&
                        Contains("counted: restarts=1 failure.worker_exception=1 recovery.replica=1"));
}

// The state an in-place recovery on a grid moved came from `donor` and, from one donor, was a
// stage's or a shard's part of the model, not the whole of it. A survivor an order interrupted in
// the last wait of a step its peers completed receives its part too, from another donor ("from
// ranks 0, 2").
void check_part_moved_from(const ProcessResult& r, int donor) {
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m,
                            std::regex("state moved over the data plane: ([0-9]+) bytes from (ranks? [0-9, ]+) in ")));
  const std::string donors = m[2].str();
  INFO("donors: " << donors);
  CHECK(std::regex_search(donors, std::regex("\\b" + std::to_string(donor) + "\\b")));
  const auto params = troupe::compute::ParameterLayout(*troupe::compute::gpt_preset("tiny")).total();
  CHECK(std::stoll(m[1].str()) > 0);
  if (donors.rfind("rank ", 0) == 0) CHECK(std::stoll(m[1].str()) < 3 * 4 * params);
}

// A kill-worker drill of a layout with pipeline stages or tensor shards: in place, every node kept
// its process, the failed rank's state came from `donor` (the rank of its stage and shard in the
// other replica) and was its part of the model only.
void check_in_place_on_grid(const ProcessResult& r, int failed, int donor) {
  check_passed(r);
  const std::string failed_rank = std::to_string(failed);
  CHECK_THAT(r.out, Contains("drill: injected failure in the worker of rank " + failed_rank + " at step 5") &&
                        Contains("steps lost: 0\n") &&
                        Contains("recovered from a surviving replica's memory: yes (in place, over the data plane)") &&
                        Contains("rank " + failed_rank + "'s worker respawned in its process, resumed from "
                                 "rank " + std::to_string(donor) + "'s memory") &&
                        Contains("every node kept its process: yes (node 0 pid ") &&
                        !Contains("restarting every node"));
  check_part_moved_from(r, donor);
}

// dp 2 × pp 2: rank = dp + 2·pp, so rank 1 is replica 1's first stage (its donor rank 0) and rank 3
// replica 1's second stage (its donor rank 2).
TEST_CASE(
    "drill kill-worker on dp 2 x pp 2: the first stage's worker is respawned in its process and takes its "
    "stage's state from the other replica, losing no step",
    "[drill][pipeline][slow]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-worker", {"--workers", "4", "--pipeline.stages", "2"});
  check_in_place_on_grid(r, 1, 0);
}

TEST_CASE(
    "drill kill-worker on dp 2 x pp 2: the second stage's worker is respawned in its process and takes its "
    "stage's state from the other replica, losing no step",
    "[drill][pipeline][slow]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-worker", {"--workers", "4", "--pipeline.stages", "2", "--target", "3"});
  check_in_place_on_grid(r, 3, 2);
}

// Under the interleaved schedule each stage holds two chunks; validations every 2 steps send their
// activations under a counter of their own, which every rank starts again under the recovery's epoch.
TEST_CASE(
    "drill kill-worker on dp 2 x pp 2 interleaved, validating every 2 steps: the second stage's worker is "
    "respawned in its process and both chunks' state comes from the other replica, losing no step",
    "[drill][pipeline][slow]") {
  TempDir dir;
  const ProcessResult r =
      drill(dir, "kill-worker", {"--workers", "4", "--pipeline.stages", "2", "--pipeline.schedule", "interleaved",
                                 "--pipeline.virtual_stages", "2", "--target", "3", "--train.val_every", "2"});
  check_in_place_on_grid(r, 3, 2);
}

// Under ZB-V stage 1 holds the V's middle chunks and every backward runs as B, then W later; the
// new process of the lost node takes both chunks' state from the other replica.
TEST_CASE(
    "drill kill-node on dp 2 x pp 2 zb-v: the second stage's node is started again and takes both chunks' "
    "state from the other replica, ending with an undisturbed run's weights",
    "[drill][pipeline][slow]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-node",
                                {"--workers", "4", "--pipeline.stages", "2", "--pipeline.schedule", "zb-v",
                                 "--pipeline.virtual_stages", "2", "--target", "3"});
  check_passed(r);
  CHECK_THAT(r.out, Contains("lost node 3") && Contains("node 3's process started again: yes (pid "));
  if (survivors_at_one_step(r))
    CHECK_THAT(r.out, Contains("rank 3 in its node's new process, resumed from rank 2's memory") &&
                          Contains("steps lost: 0\n"));
}

// dp 2 × tp 2: rank = tp + 2·dp, so rank 1 is replica 0's second shard (its donor rank 3).
TEST_CASE("drill kill-worker on dp 2 x tp 2: the second shard's worker is respawned in its process and takes its "
          "shard's state from the other replica, losing no step",
          "[drill][tensor]") {
  TempDir dir;
  const ProcessResult r =
      drill(dir, "kill-worker", {"--workers", "4", "--tensor.shards", "2", "--train.batch_size", "4"});
  check_in_place_on_grid(r, 1, 3);
}

// A lost or silent node's rank on a grid (`detected`: the job's word for it): only its process is
// started again, and its rank takes its stage's or shard's part from the other replica.
void check_node_replaced_on_grid(const ProcessResult& r, int node, int donor, const std::string& detected) {
  check_passed(r);
  if (kill_stalled_a_survivor(r.out)) return;
  const std::string rank = std::to_string(node);  // one rank per node: node i holds rank i
  CHECK_THAT(r.out, Contains(detected) && Contains("node " + rank + "'s process started again: yes (pid "));
  if (!replica_holds_newest_step(r.out)) return;
  CHECK_THAT(r.out, Contains("steps lost: 0\n") && Contains("survivors kept their processes: yes (node ") &&
                        !Contains("restarting every node"));
  // The lost rank's part comes from `donor`; a survivor the kill left a step behind (its partner in
  // the step's sums) takes its own part from another replica in the same recovery, listed beside it.
  std::smatch from;
  REQUIRE(std::regex_search(
      r.out, from, std::regex("rank " + rank + " in its node's new process, resumed from ranks? ([0-9, ]+)'s memory")));
  CHECK(std::regex_search(from[1].str(), std::regex("\\b" + std::to_string(donor) + "\\b")));
  check_part_moved_from(r, donor);
}

TEST_CASE("drill kill-node on dp 2 x pp 2: only the second stage's node process is started again, its stage's state "
          "from the other replica, losing no step",
          "[drill][pipeline]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-node", {"--workers", "4", "--pipeline.stages", "2", "--target", "3"});
  check_node_replaced_on_grid(r, 3, 2, "lost node 3");
}

TEST_CASE("drill kill-node on dp 2 x tp 2: only the second shard's node process is started again, its shard's state "
          "from the other replica, losing no step",
          "[drill][tensor]") {
  TempDir dir;
  const ProcessResult r =
      drill(dir, "kill-node", {"--workers", "4", "--tensor.shards", "2", "--train.batch_size", "4", "--target", "1"});
  check_node_replaced_on_grid(r, 1, 3, "lost node 1");
}

TEST_CASE(
    "drill hang on dp 2 x pp 2: the silent first-stage node is killed and only its process started again, "
    "losing no step",
    "[drill][pipeline][slow]") {
  TempDir dir;
  const ProcessResult r = drill(
      dir, "hang", {"--workers", "4", "--pipeline.stages", "2", "--target", "1", "--fault.heartbeat_timeout", "2"});
  check_node_replaced_on_grid(r, 1, 0, "node 1 (");
  CHECK_THAT(r.out, Contains("sent no heartbeat") && Contains("(the silent one killed first)"));
}

// Without a data-parallel replica (pp 2 or tp 2 alone) no rank holds the lost rank's state: every
// rank rolls back in its own process to the newest checkpoint, each reading only its own shards, and
// only what died is respawned. Returns the checkpoint step rolled back to, a multiple of `every`.
long check_rolled_back(const ProcessResult& r, const std::string& no_replica, long every) {
  check_passed(r);
  CHECK_THAT(r.out, Contains(no_replica + ", so every rank rolls back to the newest checkpoint") &&
                        Contains("recovered from a surviving replica's memory: no (in place by rollback to checkpoint "
                                 "step ") &&
                        Contains("state read back from checkpoint step ") && !Contains("restarting every node"));
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex("recovery: in place by rollback to checkpoint step ([0-9]+) \\(epoch "
                                                 "1\\): " + no_replica + "; every rank loads its own shards of it")));
  const long step = std::stol(m[1].str());
  CHECK(step > 0);
  CHECK(step % every == 0);
  return step;
}

// A node is killed once the drill sees step `after` end, and the ranks may finish the next step
// (and its checkpoint) before the kill lands: the steps lost are what the most advanced rank held
// beyond the checkpoint every rank rolled back to.
void check_steps_lost(const ProcessResult& r, long checkpoint_step, long after) {
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, std::regex("steps? lost \\(the most any rank held: ([0-9]+)\\)")));
  const long held = std::stol(m[1].str());
  CHECK(held >= after);
  CHECK(held >= checkpoint_step);
  CHECK_THAT(r.out, Contains("steps lost: " + std::to_string(held - checkpoint_step) + "\n"));
}

// pp 2 without dp: rank 1 is the second stage. It throws in step 5; the newest checkpoint is step 3
// (checkpoint.every 3), so step 4 is trained again.
TEST_CASE(
    "drill kill-worker on pp 2 without dp: no replica holds the second stage, so its worker is respawned in its "
    "process and every rank rolls back to the newest checkpoint, losing the steps since",
    "[drill][pipeline][rollback][slow]") {
  TempDir dir;
  const ProcessResult r =
      drill(dir, "kill-worker", {"--workers", "2", "--pipeline.stages", "2", "--checkpoint.every", "3"});
  CHECK(check_rolled_back(r, "no replica holds pipeline stage 1's state", 3) == 3);
  CHECK_THAT(r.out, Contains("drill: injected failure in the worker of rank 1 at step 5") &&
                        Contains("steps lost: 1\n") && Contains("1 step lost (the most any rank held: 4)") &&
                        Contains("rank 1's worker respawned in its process, resumed from checkpoint ") &&
                        Contains("every node kept its process: yes (node 0 pid "));
}

// Two stages of two replicas, the experts of each stage split over its two ranks: no replica holds
// a rank's experts, so every rank rolls back in place to the newest checkpoint (step 4, or step 2
// where step 4's was still being committed when rank 1 threw in step 5).
TEST_CASE(
    "drill kill-worker on 2 stages with expert shards: one expert group a stage rolls every rank back to the "
    "newest checkpoint in place, and the weights are an undisturbed run's",
    "[drill][moe][pipeline][rollback][slow]") {
  TempDir dir;
  const ProcessResult r =
      drill(dir, "kill-worker",
            {"--workers", "4", "--pipeline.stages", "2", "--model.preset", "moe-tiny", "--expert.shards", "2"});
  const long step = check_rolled_back(r, "one expert group of expert.shards 2: no replica holds a rank's experts", 2);
  CHECK_THAT(r.out, Contains("drill: injected failure in the worker of rank 1 at step 5") &&
                        Contains("rank 1's worker respawned in its process, resumed from checkpoint ") &&
                        Contains("every node kept its process: yes (node 0 pid "));
  check_steps_lost(r, step, 4);
}

// Two stages of four replicas in expert groups of 2: rank 1 (stage 0, replica 1) holds the second
// half of stage 0's experts, as rank 3 (replica 3) does, which gives it its state in place.
TEST_CASE(
    "drill kill-worker on 2 stages of 4 replicas in expert groups of 2: the worker takes its experts from the "
    "replica at its place in the other expert group, losing no step",
    "[drill][moe][pipeline][slow]") {
  TempDir dir;
  const ProcessResult r =
      drill(dir, "kill-worker",
            {"--workers", "8", "--pipeline.stages", "2", "--model.preset", "moe-tiny", "--expert.shards", "2"});
  check_passed(r);
  CHECK_THAT(r.out, Contains("steps lost: 0\n") &&
                        Contains("rank 1's worker respawned in its process, resumed from rank 3's memory") &&
                        Contains("recovered from a surviving replica's memory: yes (in place, over the data plane)") &&
                        !Contains("restarting every node"));
}

// Two tensor shards of four replicas in expert groups of 2: rank = tp + 2·dp, so rank 3 (tensor
// shard 1 of replica 1) holds its slices of the second half of the experts, as rank 7 (replica 3)
// does, which gives the lost node's new process its state.
TEST_CASE(
    "drill kill-node on tp 2 x dp 4 in expert groups of 2: the lost node's rank takes its slices of its experts "
    "from the rank at its place in the other expert group",
    "[drill][moe][tensor]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-node",
                                {"--workers", "8", "--tensor.shards", "2", "--model.preset", "moe-tiny",
                                 "--expert.shards", "2", "--train.batch_size", "2", "--target", "3"});
  check_node_replaced_on_grid(r, 3, 7, "lost node 3");
}

TEST_CASE("drill kill-node on pp 2 without dp: only the lost stage's process is started again, and the survivor rolls "
          "back in its own process to the newest checkpoint",
          "[drill][pipeline][rollback]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-node", {"--workers", "2", "--pipeline.stages", "2", "--checkpoint.every",
                                                   "3", "--target", "0"});
  if (kill_stalled_a_survivor(r.out)) return;
  check_rolled_back(r, "no replica holds pipeline stage 0's state", 3);
  CHECK_THAT(r.out, Contains("lost node 0") && Contains("rank 0 in its node's new process, resumed from checkpoint ") &&
                        Contains("survivors kept their processes: yes (node 1 pid ") &&
                        Contains("node 0's process started again: yes (pid "));
}

TEST_CASE(
    "drill hang on pp 2 without dp: the silent stage's process is killed and started again, and every rank "
    "rolls back to the newest checkpoint",
    "[drill][pipeline][rollback][slow]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "hang", {"--workers", "2", "--pipeline.stages", "2", "--checkpoint.every", "3",
                                              "--fault.heartbeat_timeout", "2"});
  if (kill_stalled_a_survivor(r.out)) return;
  check_rolled_back(r, "no replica holds pipeline stage 1's state", 3);
  CHECK_THAT(r.out, Contains("sent no heartbeat") && Contains("(the silent one killed first)") &&
                        Contains("survivors kept their processes: yes (node 0 pid ") &&
                        Contains("node 1's process started again: yes (pid "));
}

// tp 2 without dp: rank 1 is the second tensor shard.
TEST_CASE("drill kill-worker on tp 2 without dp: no replica holds the second shard, so every rank rolls back to the "
          "newest checkpoint in its own process",
          "[drill][tensor][rollback]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-worker", {"--workers", "2", "--tensor.shards", "2", "--train.batch_size",
                                                     "4", "--checkpoint.every", "3"});
  CHECK(check_rolled_back(r, "no replica holds tensor shard 1's state", 3) == 3);
  CHECK_THAT(r.out, Contains("steps lost: 1\n") && Contains("every node kept its process: yes (node 0 pid "));
}

// Under ZeRO and PowerSGD every replica holds state of its own (a shard of the moments, of the
// parameters too under ZeRO-3; a residual): a lost rank's is nowhere else, so every rank rolls back
// to the newest checkpoint (step 4 of checkpoint.every 2), which holds them all. A worker that
// throws in step 5 held 4 steps: none is lost — or, where step 4's checkpoint was still being
// written when the worker threw (a loaded machine), the ranks go back to step 2 and lose two. A
// node killed after step 5 loses one, or none when step 6 and its checkpoint finished before the
// kill landed.
TEST_CASE("drill kill-worker under ZeRO-1: the worker is respawned in its process and every rank rolls back to the "
          "newest checkpoint, which holds its shard of the moments",
          "[drill][rollback]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-worker", {"--train.zero", "1"});
  const long step =
      check_rolled_back(r, "train.zero 1 shards the optimizer state: no replica holds a lost shard of the moments", 2);
  CHECK((step == 4 || step == 2));
  check_steps_lost(r, step, 4);
  CHECK_THAT(r.out, Contains("every node kept its process: yes (node 0 pid "));
}

TEST_CASE("drill kill-node under ZeRO-3: only the lost shard's node process is started again, and the survivor rolls "
          "back in its own process, forgetting the units it had gathered",
          "[drill][zero3][rollback]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-node", {"--train.zero", "3"});
  if (kill_stalled_a_survivor(r.out)) return;
  check_steps_lost(
      r,
      check_rolled_back(r, "train.zero 3 shards the parameters and the optimizer state: no replica holds a lost shard",
                        2),
      5);
  CHECK_THAT(r.out, Contains("lost node 1") && Contains("survivors kept their processes: yes (node 0 pid ") &&
                        Contains("node 1's process started again: yes (pid "));
}

// Four workers in expert groups of 2 under ZeRO-3: a rank keeps a quarter of the dense runs and half
// of its experts' runs, which no other rank keeps, so every rank rolls back in place.
TEST_CASE(
    "drill kill-worker under ZeRO-3 with expert shards: the worker is respawned and every rank rolls back to the "
    "newest checkpoint, which holds its segments of the dense and the expert runs",
    "[drill][zero3][moe][rollback]") {
  TempDir dir;
  const ProcessResult r =
      drill(dir, "kill-worker",
            {"--workers", "4", "--model.preset", "moe-tiny", "--expert.shards", "2", "--train.zero", "3"});
  const long step = check_rolled_back(
      r, "train.zero 3 shards the parameters and the optimizer state: no replica holds a lost shard", 2);
  check_steps_lost(r, step, 4);
  CHECK_THAT(r.out, Contains("every node kept its process: yes (node 0 pid "));
}

TEST_CASE("drill kill-worker on dp 2 x pp 2 under ZeRO-3: the stage's worker is respawned and every rank rolls back",
          "[drill][zero3][pipeline][rollback][slow]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-worker", {"--workers", "4", "--pipeline.stages", "2", "--train.zero", "3"});
  check_rolled_back(r, "train.zero 3 shards the parameters and the optimizer state: no replica holds a lost shard", 2);
  CHECK_THAT(r.out, Contains("every node kept its process: yes (node 0 pid "));
}

// With checkpoint.async the coordinator waits for the shards in a background thread: the survivor
// gives that wait up as it takes the order, so no later save sits out the 120 s commit timeout
// (the drill's own timeout is shorter) and no save fails for the shard the dead rank never wrote.
TEST_CASE(
    "drill kill-node under ZeRO-1 with async checkpoints, killed right after a checkpointed step: the background "
    "commit waiting for the lost shard is given up, and every later checkpoint commits",
    "[drill][rollback][slow]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-node",
                                {"--keep", "--at-step", "4", "--train.zero", "1", "--checkpoint.async", "true"},
                                std::chrono::seconds(100));
  REQUIRE(!r.timed_out);
  check_rolled_back(r, "train.zero 1 shards the optimizer state: no replica holds a lost shard of the moments", 2);
  const std::string log = file_text(dir.path() / "kill-node" / "drilled.log");
  CHECK_THAT(log, !Contains("error checkpoint") && Contains("step-0000012 committed"));
}

TEST_CASE(
    "drill kill-node with PowerSGD: the lost rank's residual is nowhere else, so only its node process is "
    "started again and every rank rolls back to the newest checkpoint, which holds every rank's",
    "[drill][compression][rollback][slow]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-node", {"--comm.compress", "powersgd", "--comm.compress_start_step", "2"});
  check_steps_lost(
      r, check_rolled_back(r, "comm.compress powersgd keeps each rank's residual only in its own memory", 2), 5);
  CHECK_THAT(r.out, Contains("lost node 1") && Contains("survivors kept their processes: yes (node 0 pid "));
}

// bf16 sums keep no state of their own: the replica gives the whole state, as with plain sums.
TEST_CASE("drill kill-worker with bf16 sums: the worker takes its state from the surviving replica, losing no step",
          "[drill][compression]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-worker", {"--comm.compress", "bf16", "--comm.compress_start_step", "2"});
  check_passed(r);
  CHECK_THAT(r.out, Contains("steps lost: 0\n") &&
                        Contains("recovered from a surviving replica's memory: yes (in place, over the data plane)") &&
                        !Contains("restarting every node"));
}

// Lost after step 5, before the first checkpoint (step 8 of checkpoint.every 8): nothing to roll
// back to, so every node restarts, from the start, and says why.
TEST_CASE("drill kill-node on pp 2 without dp before the first checkpoint: every node restarts, saying why",
          "[drill][pipeline][rollback][slow]") {
  TempDir dir;
  const ProcessResult r =
      drill(dir, "kill-node", {"--workers", "2", "--pipeline.stages", "2", "--checkpoint.every", "8"});
  check_passed(r);
  CHECK_THAT(r.out, Contains("recovery: restarting every node: no replica holds pipeline stage 1's state, and no "
                             "complete checkpoint to roll back to (rank 0 finds none in checkpoint.dir)") &&
                        Contains("every node restarted from the start (no checkpoint yet)") &&
                        Contains("counted: restarts=1 failure.node_lost=1 recovery.checkpoint=1") &&
                        !Contains("recovery: in place done"));
}

TEST_CASE("drill hang: a stopped node is caught by its missing heartbeat, killed, and only its process is started "
          "again, in place",
          "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "hang", {"--fault.heartbeat_timeout", "2"});
  check_passed(r);
  if (kill_stalled_a_survivor(r.out)) return;
  CHECK_THAT(r.out, Contains("sent no heartbeat") && Contains("(the silent one killed first)") &&
                        Contains("steps lost: 0\n") && Contains("survivors kept their processes: yes (node 0 pid ") &&
                        Contains("node 1's process started again: yes (pid ") && !Contains("restarting every node"));
  CHECK(seconds_after(r.out, "detected") < 6.0);
}

TEST_CASE("drill hang with fault.recovery restart: the silent node is stopped and every node restarts from the "
          "survivors' rescue snapshot",
          "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "hang", {"--fault.heartbeat_timeout", "2", "--fault.recovery", "restart"});
  check_passed(r);
  CHECK_THAT(r.out, Contains("sent no heartbeat") && Contains("recovery: restarting every node: fault.recovery is restart") &&
                        Contains("steps lost: 0\n") && Contains("counted: restarts=1 failure.hang=1 recovery.replica=1"));
}

// A failure before the drill's step (node 1's process kills itself as step 2 begins, and is started
// again in place) leaves node 1 a new process: the drill must kill that one, not the pid node 1
// first joined with, which no longer runs anything of the job. (The verdict itself expects node 1
// started again once, so it is not asked to pass here.)
TEST_CASE("drill kill-node kills the process a node has at the step, after a recovery gave it a new one", "[drill]") {
  TempDir dir;
  const ScopedEnv killed_in_step_2("TROUPE_DRILL_KILL_AT", "1:2");
  const ProcessResult r = drill(dir, "kill-node");
  std::smatch first, killed;
  REQUIRE(
      std::regex_search(r.out, first, std::regex("node 1's process started again: [A-Za-z]+ \\(pid ([0-9]+) then")));
  REQUIRE(std::regex_search(r.out, killed, std::regex("SIGKILL to node 1 \\(pid ([0-9]+)\\) after step 5")));
  CHECK(killed[1].str() != first[1].str());
  CHECK_THAT(r.out,
             Contains("detected after") && Contains("lost node 1 (vm, pid " + killed[1].str() + ")") &&
                 Contains("steps lost: 0\n") &&
                 Contains("final weights equal to an undisturbed run: yes (parameters and AdamW moments, bitwise)"));
}

TEST_CASE("drill slow-node: a straggler is named and the job goes on", "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "slow-node", {"--train.steps", "30"});
  check_passed(r);
  CHECK_THAT(r.out, Contains("straggler: rank 1 (node 1") && Contains("the job went on to the end: yes"));
}

// The node of every kill in a chaos verdict, in order.
std::vector<int> killed_nodes(const std::string& out) {
  std::vector<int> nodes;
  const std::regex kill("\n  kill [0-9]+: node ([0-9]+) \\(pid [0-9]+\\) in step ([0-9]+)");
  for (std::sregex_iterator it(out.begin(), out.end(), kill), end; it != end; ++it) nodes.push_back(std::stoi((*it)[1]));
  return nodes;
}

// A chaos drill on tiny, 4 nodes, a kill in every 10th step of `steps`: it passes, every planned
// kill was made and recovered, and no node was killed twice in a row.
void check_chaos(long steps, std::vector<std::string> extra = {}) {
  TempDir dir;
  const long kills = (steps - 1) / 10;
  extra.insert(extra.end(), {"--workers", "4", "--train.steps", std::to_string(steps)});
  const ProcessResult r = drill(dir, "chaos", extra, std::chrono::seconds(60 + 12 * steps));
  check_passed(r);
  std::smatch seed;
  CHECK(std::regex_search(r.out, seed, std::regex("seed ([0-9]+) \\(--seed \\1 replays the choices\\)")));
  const std::string n = std::to_string(kills);
  CHECK(std::regex_search(r.out, std::regex("totals: " + n + " of " + n + " kills made \\([0-9]+ while a checkpoint "
                                            "was being written\\), " + n + " recovered; steps lost 0")));
  CHECK_THAT(r.out, Contains("job finished: yes"));
  const std::vector<int> nodes = killed_nodes(r.out);
  REQUIRE(nodes.size() == static_cast<std::size_t>(kills));
  for (std::size_t i = 1; i < nodes.size(); ++i) CHECK(nodes[i] != nodes[i - 1]);
  for (int node : nodes) CHECK((node >= 0 && node < 4));
}

TEST_CASE(
    "drill chaos: a node SIGKILLed in steps 10 and 20 of 30, another one each time, at a random moment "
    "while the previous step's checkpoint may be in flight, and the job ends bitwise equal to the undisturbed run",
    "[drill][slow]") {
  check_chaos(30, {"--checkpoint.every", "1"});
}

// On 2 nodes the kills alternate, so the third kill hits a process an earlier in-place recovery
// started: its exit, seen by the launcher after the job saw the loss, is no failure of the new one.
TEST_CASE("drill chaos on 2 nodes: a node process started again in place is killed in its turn and replaced in "
          "place again",
          "[drill]") {
  TempDir dir;
  const ProcessResult r =
      drill(dir, "chaos", {"--workers", "2", "--train.steps", "30", "--kill-every", "8"}, std::chrono::seconds(300));
  check_passed(r);
  const std::vector<int> nodes = killed_nodes(r.out);
  REQUIRE(nodes.size() == 3);
  CHECK(nodes[2] == nodes[0]);
  const std::regex in_place("\\n  kill [0-9]+: .* in its node's new process, resumed from rank [01]'s memory");
  CHECK(std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), in_place), std::sregex_iterator()) == 3);
  CHECK_THAT(r.out, !Contains("restarting every node"));
}

// Each kill's node and drawn moment, as its verdict line says them: what a seed decides.
std::vector<std::string> drawn_kills(const std::string& out) {
  std::vector<std::string> drawn;
  const std::regex kill("\\n  kill [0-9]+: node ([0-9]+) .*drawn at ([0-9]+)% of a step");
  for (std::sregex_iterator it(out.begin(), out.end(), kill), end; it != end; ++it)
    drawn.push_back("node " + (*it)[1].str() + " at " + (*it)[2].str() + "%");
  return drawn;
}

TEST_CASE("drill chaos --seed replays the kills' nodes and moments", "[drill][slow]") {
  TempDir dir;
  auto drawn_with_seed = [&] {
    const ProcessResult r = drill(dir, "chaos",
                                  {"--workers", "4", "--train.steps", "10", "--kill-every", "3", "--seed", "2026"});
    check_passed(r);
    CHECK_THAT(r.out, Contains("seed 2026 (--seed 2026 replays the choices)"));
    return drawn_kills(r.out);
  };
  const std::vector<std::string> first = drawn_with_seed();
  CHECK(first.size() == 3);
  CHECK(drawn_with_seed() == first);
}

TEST_CASE("drill chaos: 9 kills in 100 steps on 4 nodes, each recovered, and the job ends bitwise equal to the "
          "undisturbed run",
          "[drill][slow]") {
  check_chaos(100);
}

TEST_CASE("drill corrupt-checkpoint: the flipped checkpoint is passed over and the older one restores", "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "corrupt-checkpoint");
  check_passed(r);
  CHECK_THAT(r.out, Contains("skipped step-0000012: rank-00000.safetensors hash mismatch") &&
                        Contains("from " + (dir.path() / "corrupt-checkpoint" / "drilled" / "step-0000010").string()));
}

TEST_CASE("drill kill-during-checkpoint: no torn checkpoint is ever loaded", "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "kill-during-checkpoint");
  check_passed(r);
  CHECK_THAT(r.out, Contains("a torn checkpoint was loaded: no"));
}

TEST_CASE("drill disk-full: training goes on, the error is reported, the previous checkpoint stays intact", "[drill]") {
  TempDir dir;
  const ProcessResult r = drill(dir, "disk-full");
  check_passed(r);
  CHECK_THAT(r.out, Contains("File too large; training goes on") && Contains("training went on to the last step: yes") &&
                        Contains("previous checkpoint (step 2) intact: yes"));
}

TEST_CASE("drill refuses an unknown scenario, a step outside the run and a process fault without workers",
          "[drill][cli]") {
  TempDir dir;
  check_rejected_in(dir, {"drill", "meteor"}, "unknown drill scenario 'meteor' (known: kill-node, kill-worker");
  check_rejected_in(dir, {"drill", "kill-node", "--train.steps", "10", "--at-step", "10"},
                    "--at-step 10 must be between 1 and train.steps − 1 (9)");
  check_rejected_in(dir, {"drill", "kill-node", "--workers", "1"}, "drill kill-node needs --workers 2 or more");
  check_rejected_in(dir, {"drill", "kill-node", "--checkpoint.dir", "x"}, "checkpoint.dir is set by the drill");
  check_rejected_in(dir, {"drill", "chaos", "--train.steps", "10", "--kill-every", "10"},
                    "--kill-every 10 must be between 2 and train.steps − 1 (9) for at least one kill");
  check_rejected_in(dir, {"drill", "chaos", "--workers", "1"}, "drill chaos needs --workers 2 or more");
  check_rejected_in(dir, {"drill", "kill-node", "--workers", "3", "--target", "1,3"},
                    "--target 3 is not a node of the job's 3 workers");
  check_rejected_in(dir, {"drill", "kill-worker", "--workers", "3", "--target", "1,2"},
                    "--target 1,2: only kill-node and hang take several nodes, not kill-worker");
  check_rejected_in(dir, {"drill", "kill-node", "--workers", "3", "--target", "1,1"}, "--target 1,1 names a node twice");
  check_rejected_in(dir, {"drill", "hang", "--workers", "2", "--target", "0,1"},
                    "--target 0,1 leaves no node of the job's 2 workers running");
}

TEST_CASE("after a PASS a drill removes what it wrote unless --keep, never a --dir folder, and after a FAIL it keeps "
          "everything and says where",
          "[drill]") {
  TempDir dir;
  std::vector<std::string> args{"drill", "corrupt-checkpoint", "--workers", "1", "--at-step", "2",
                                "--model.preset", "tiny", "--train.steps", "4", "--train.threads", "1",
                                "--train.val_batches", "1", "--train.val_every", "0"};
  auto passes = [&](const std::vector<std::string>& extra) {
    args.insert(args.end(), extra.begin(), extra.end());
    const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(120));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 0);
    CHECK_THAT(r.out, Contains("verdict: PASS"));
  };
  SECTION("its drill-SCENARIO-PID folder goes") {
    passes({});
    CHECK(entries(dir.path()).empty());
  }
  SECTION("with --keep it stays") {
    passes({"--keep"});
    const std::vector<std::string> left = entries(dir.path());
    REQUIRE(left.size() == 1);
    CHECK_THAT(left[0], Catch::StartsWith("drill-corrupt-checkpoint-"));
    CHECK(std::filesystem::exists(dir.path() / left[0] / "job.toml"));
    CHECK(std::filesystem::exists(dir.path() / left[0] / "drilled" / "step-0000004"));
  }
  SECTION("a folder named with --dir is the user's: only the drill's runs, logs and job.toml go") {
    dir.write("mine/notes.txt", "kept");
    passes({"--dir", (dir.path() / "mine").string()});
    CHECK(entries(dir.path()) == std::vector<std::string>{"mine"});
    CHECK(entries(dir.path() / "mine") == std::vector<std::string>{"notes.txt"});
  }
  SECTION("a FAIL keeps its folder and says where it is") {
    // With one checkpoint kept the corrupted one has no older one to fall back to: no recovery.
    args.insert(args.end(), {"--checkpoint.keep_last", "1"});
    const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(120));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    CHECK(r.exit_code == 1);
    const std::vector<std::string> left = entries(dir.path());
    REQUIRE(left.size() == 1);
    const std::string kept = std::filesystem::canonical(dir.path() / left[0]).string();
    CHECK_THAT(r.out, Contains("verdict: FAIL\ndrill folder kept for inspection: " + kept + "\n"));
  }
}
