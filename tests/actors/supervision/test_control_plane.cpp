// The control plane across real process boundaries: a job supervisor in this process, node
// supervisors in separate test_actors_node processes over loopback. Every message type on the
// wire (join, join result, start with its node entries and byte blobs, node done, stop,
// heartbeat, the rescue order and its answer) crosses a process boundary here; the catalogue's
// serialization is pinned by a round trip as well. The job supervisor's phases (joining, running,
// rescuing) each meet their ways out.

#include <catch2/catch.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/actor_system_setup.hpp"
#include "actors/round_trip.hpp"
#include "actors/supervision/job_supervisor.hpp"

extern char** environ;

using namespace troupe::actors;
using Catch::Contains;
using troupe::test::round_trip;

namespace {

constexpr const char* token = "s3cret";
constexpr const char* build = "test-build";
constexpr std::uint64_t config_hash = 42;

struct NodeProcess {
  pid_t pid = -1;

  static NodeProcess start(std::uint16_t port, int node_index, const std::string& behaviour,
                           const std::string& node_token = token, const std::string& node_build = build,
                           int attempt = 0) {
    std::vector<std::string> args{TEST_ACTORS_NODE,
                                  std::to_string(port),
                                  std::to_string(node_index),
                                  node_token,
                                  node_build,
                                  std::to_string(config_hash),
                                  behaviour,
                                  std::to_string(attempt)};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    NodeProcess p;
    REQUIRE(posix_spawn(&p.pid, argv[0], nullptr, nullptr, argv.data(), environ) == 0);
    return p;
  }

  // The exit code, or nullopt if it has not exited within the timeout (it is then killed).
  std::optional<int> wait(std::chrono::seconds timeout) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    int status = 0;
    while (std::chrono::steady_clock::now() < deadline) {
      if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    return std::nullopt;
  }
};

// The job's last step is 3: the "trained" nodes finish it, the others never get there.
JobPlan plan_of(int nodes, std::chrono::milliseconds join_timeout = std::chrono::seconds(20)) {
  JobPlan plan{token, build, config_hash, {}, join_timeout, std::chrono::seconds(10), std::chrono::milliseconds(0)};
  plan.last_step = 3;
  for (int i = 0; i < nodes; ++i) plan.nodes.push_back({i, "localhost", 1 + i, i * (i + 1) / 2});
  return plan;
}

struct Job {
  TroupeConfig cfg;
  caf::actor_system system{cfg};
  caf::scoped_actor listener{system};
  caf::actor supervisor;
  std::uint16_t port = 0;

  explicit Job(JobPlan plan) {
    supervisor = spawn_job_supervisor(system, std::move(plan), listener);
    auto published = system.middleman().publish(supervisor, 0, "127.0.0.1", true);
    REQUIRE(published);
    port = *published;
  }
  ~Job() { caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown); }

  std::optional<job_outcome_msg> outcome(std::chrono::seconds timeout) {
    std::optional<job_outcome_msg> result;
    listener->receive([&](done_atom, const job_outcome_msg& o) { result = o; },
                      caf::after(timeout) >> [] {});
    return result;
  }
};

// After `settle` (the nodes joined and started), sends `signal` to `target` and waits for the job's
// outcome; with the seconds from the signal to it.
struct AfterSignal {
  std::optional<job_outcome_msg> outcome;
  double seconds = 0;
};
AfterSignal outcome_after_signal(Job& job, const NodeProcess& target, int signal, std::chrono::milliseconds settle,
                                 std::chrono::seconds timeout) {
  std::this_thread::sleep_for(settle);
  const auto sent_at = std::chrono::steady_clock::now();
  kill(target.pid, signal);
  AfterSignal after{job.outcome(timeout)};
  after.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent_at).count();
  return after;
}

}  // namespace

TEST_CASE("nodes join, receive every peer in the start message, and finish the job", "[actors]") {
  Job job(plan_of(3));
  std::vector<NodeProcess> nodes;
  for (int i = 0; i < 3; ++i) nodes.push_back(NodeProcess::start(job.port, i, "check"));
  auto outcome = job.outcome(std::chrono::seconds(30));
  REQUIRE(outcome);
  INFO(outcome->reason);
  CHECK(outcome->exit_code == 0);
  for (auto& n : nodes) CHECK(n.wait(std::chrono::seconds(10)) == 0);
}

TEST_CASE("a node with the wrong token is rejected and the job goes on", "[actors]") {
  Job job(plan_of(2));
  auto impostor = NodeProcess::start(job.port, 0, "check", "wrong-token");
  CHECK(impostor.wait(std::chrono::seconds(15)) == 2);
  auto good0 = NodeProcess::start(job.port, 0, "check");
  auto good1 = NodeProcess::start(job.port, 1, "check");
  auto outcome = job.outcome(std::chrono::seconds(30));
  REQUIRE(outcome);
  CHECK(outcome->exit_code == 0);
  CHECK(outcome->failure_kind == FailureKind::node_exit);
  CHECK(good0.wait(std::chrono::seconds(10)) == 0);
  CHECK(good1.wait(std::chrono::seconds(10)) == 0);
}

TEST_CASE("a node process of an older attempt than the job's is refused, and the job goes on with the current ones",
          "[actors]") {
  JobPlan plan = plan_of(2);
  plan.attempt = 1;
  Job job(std::move(plan));
  auto stale = NodeProcess::start(job.port, 0, "check", token, build, 0);
  CHECK(stale.wait(std::chrono::seconds(15)) == 2);
  auto current0 = NodeProcess::start(job.port, 0, "check", token, build, 1);
  auto current1 = NodeProcess::start(job.port, 1, "check", token, build, 1);
  auto outcome = job.outcome(std::chrono::seconds(30));
  REQUIRE(outcome);
  CHECK(outcome->exit_code == 0);
  CHECK(current0.wait(std::chrono::seconds(10)) == 0);
  CHECK(current1.wait(std::chrono::seconds(10)) == 0);
}

TEST_CASE("a node of the job running another build fails the job at once, named", "[actors]") {
  Job job(plan_of(2));
  auto good = NodeProcess::start(job.port, 0, "check");
  auto stale = NodeProcess::start(job.port, 1, "check", token, "other-build");
  auto outcome = job.outcome(std::chrono::seconds(15));
  REQUIRE(outcome);
  CHECK(outcome->exit_code == 2);
  CHECK(outcome->failure_kind == FailureKind::rejected);
  CHECK(outcome->failed_nodes == std::vector<int>{1});
  CHECK_THAT(outcome->reason, Contains("node 1 (localhost") &&
                                  Contains("cannot join: build other-build differs from the job's test-build"));
  CHECK(stale.wait(std::chrono::seconds(10)) == 2);
  good.wait(std::chrono::seconds(10));
}

TEST_CASE("a node that fails ends the job with its name and stops the others", "[actors]") {
  Job job(plan_of(2));
  auto worker = NodeProcess::start(job.port, 0, "hang");
  auto failing = NodeProcess::start(job.port, 1, "fail");
  auto outcome = job.outcome(std::chrono::seconds(30));
  REQUIRE(outcome);
  CHECK(outcome->exit_code == 1);
  CHECK(outcome->failure_kind == FailureKind::worker_exception);
  CHECK(outcome->failed_nodes == std::vector<int>{1});
  CHECK_THAT(outcome->reason, Contains("node 1") && Contains("deliberate failure"));
  CHECK(failing.wait(std::chrono::seconds(10)) == 1);
  // The waiting worker honours the stop that its node supervisor passes on.
  CHECK(worker.wait(std::chrono::seconds(10)) == 1);
}

TEST_CASE("a comm failure while every node is alive names the rank the others were waiting for", "[actors]") {
  // Node 0 (rank 0) computes without finishing its step, then reports that its connection to
  // rank 1 broke, as a stalled rank does once its waiting peer gives up; ranks 1 and 2 wait.
  Job job(plan_of(2));
  auto stalled = NodeProcess::start(job.port, 0, "stall");
  auto waiting = NodeProcess::start(job.port, 1, "hang");
  auto outcome = job.outcome(std::chrono::seconds(30));
  REQUIRE(outcome);
  std::printf("%s\n", outcome->reason.c_str());
  CHECK(outcome->exit_code == 1);
  CHECK(outcome->failed_nodes == std::vector<int>{0});
  const std::string& r = outcome->reason;
  CHECK_THAT(r, Catch::StartsWith("node 0") && Contains("failed: comm: all_reduce on group 0 failed: rank 1 lost"));
  const auto cause = r.find(", the likely cause: rank 0 (node 0");
  REQUIRE(cause != std::string::npos);
  CHECK_THAT(r.substr(cause), Contains("in step 1, not waiting for any message, no progress for") &&
                                  Contains("while every other rank waited (rank 1 (node 1") &&
                                  Contains("rank 2 (node 1") && Contains("for a message that never comes"));
  CHECK(stalled.wait(std::chrono::seconds(10)) == 1);
  CHECK(waiting.wait(std::chrono::seconds(10)) == 1);
}

TEST_CASE("a comm failure names no likely cause when two ranks were not waiting", "[actors]") {
  Job job(plan_of(2));
  auto stalled = NodeProcess::start(job.port, 0, "stall");
  auto busy = NodeProcess::start(job.port, 1, "busy");
  auto outcome = job.outcome(std::chrono::seconds(30));
  REQUIRE(outcome);
  CHECK_THAT(outcome->reason, Contains("failed: comm: all_reduce on group 0 failed: rank 1 lost") &&
                                  !Contains("likely cause"));
  CHECK(stalled.wait(std::chrono::seconds(10)) == 1);
  CHECK(busy.wait(std::chrono::seconds(10)) == 1);
}

TEST_CASE("a node killed with SIGKILL is named within seconds, not waited for", "[actors]") {
  Job job(plan_of(2));
  auto victim = NodeProcess::start(job.port, 0, "hang");
  auto other = NodeProcess::start(job.port, 1, "hang");
  const auto [outcome, seconds] =
      outcome_after_signal(job, victim, SIGKILL, std::chrono::milliseconds(1500), std::chrono::seconds(15));
  REQUIRE(outcome);
  std::printf("lost node reported %.3f s after SIGKILL: %s\n", seconds, outcome->reason.c_str());
  CHECK(outcome->exit_code == 1);
  CHECK_THAT(outcome->reason, Contains("lost node 0"));
  CHECK(outcome->failure_kind == FailureKind::node_lost);
  CHECK(outcome->failed_nodes == std::vector<int>{0});
  CHECK(seconds < 5.0);
  victim.wait(std::chrono::seconds(2));
  other.wait(std::chrono::seconds(2));
}

TEST_CASE("a stopped node process is named by its missing heartbeat", "[actors]") {
  JobPlan plan = plan_of(2);
  plan.heartbeat_timeout = std::chrono::seconds(1);
  Job job(std::move(plan));
  auto running = NodeProcess::start(job.port, 0, "hang");
  auto frozen = NodeProcess::start(job.port, 1, "hang");
  const auto [outcome, seconds] =
      outcome_after_signal(job, frozen, SIGSTOP, std::chrono::milliseconds(1500), std::chrono::seconds(15));
  REQUIRE(outcome);
  std::printf("stopped node reported %.3f s after SIGSTOP: %s\n", seconds, outcome->reason.c_str());
  CHECK(outcome->exit_code == 1);
  CHECK_THAT(outcome->reason, Contains("node 1 (localhost") && Contains("sent no heartbeat for") &&
                                  Contains("reason unknown (unreachable, stopped or hung)") && Contains("in step 1"));
  CHECK_THAT(outcome->reason, !Contains("hung or stopped"));
  CHECK(outcome->failure_kind == FailureKind::hang);
  CHECK(outcome->failed_nodes == std::vector<int>{1});
  CHECK(seconds < 4.0);
  CHECK(running.wait(std::chrono::seconds(10)) == 1);
  kill(frozen.pid, SIGKILL);
  frozen.wait(std::chrono::seconds(5));
}

TEST_CASE("a node killed after every rank finished the last step ends the job as finished, without a rescue",
          "[actors]") {
  JobPlan plan = plan_of(2);
  plan.rescue_timeout = std::chrono::seconds(30);
  Job job(std::move(plan));
  auto survivor = NodeProcess::start(job.port, 0, "trained");
  auto victim = NodeProcess::start(job.port, 1, "trained");
  // The nodes beat every 100 ms: by the kill the job has heard that both finished step 3.
  const auto [outcome, seconds] =
      outcome_after_signal(job, victim, SIGKILL, std::chrono::milliseconds(1500), std::chrono::seconds(40));
  REQUIRE(outcome);
  std::printf("node lost after the last step: job ended %.3f s after SIGKILL: %s\n", seconds, outcome->reason.c_str());
  CHECK(outcome->exit_code == 0);
  CHECK(outcome->failure_kind == FailureKind::node_exit);
  CHECK(outcome->rescued_step == -1);
  CHECK_THAT(outcome->reason, Contains("every rank finished its last step (3)") && Contains("lost node 1") &&
                                  Contains("after training completed"));
  // Far below the 30 s the rescue would have waited for a snapshot nobody writes.
  CHECK(seconds < 10.0);
  CHECK(survivor.wait(std::chrono::seconds(10)) == 0);
  victim.wait(std::chrono::seconds(2));
}

TEST_CASE("a node lost before its heartbeat told its last step ends the job as finished once every other node "
          "succeeded",
          "[actors]") {
  JobPlan plan = plan_of(2);
  plan.rescue_timeout = std::chrono::seconds(30);
  Job job(std::move(plan));
  // Node 0 succeeds at once; node 1 never reports a step, as a node killed between its last step
  // and the heartbeat that would have counted it. Node 0 could not have finished without it.
  auto survivor = NodeProcess::start(job.port, 0, "check");
  auto victim = NodeProcess::start(job.port, 1, "busy");
  const auto [outcome, seconds] =
      outcome_after_signal(job, victim, SIGKILL, std::chrono::milliseconds(1500), std::chrono::seconds(40));
  REQUIRE(outcome);
  INFO(outcome->reason);
  CHECK(outcome->exit_code == 0);
  CHECK_THAT(outcome->reason, Contains("lost node 1") && Contains("after training completed"));
  CHECK(seconds < 10.0);
  CHECK(survivor.wait(std::chrono::seconds(10)) == 0);
  victim.wait(std::chrono::seconds(2));
}

TEST_CASE("a node killed before its last step is a failure, though the others finished theirs", "[actors]") {
  Job job(plan_of(2));
  auto finished = NodeProcess::start(job.port, 0, "trained");
  auto behind = NodeProcess::start(job.port, 1, "hang");
  const auto [outcome, seconds] =
      outcome_after_signal(job, behind, SIGKILL, std::chrono::milliseconds(1500), std::chrono::seconds(15));
  REQUIRE(outcome);
  INFO(outcome->reason);
  CHECK(outcome->exit_code == 1);
  CHECK(outcome->failure_kind == FailureKind::node_lost);
  CHECK(outcome->failed_nodes == std::vector<int>{1});
  CHECK_THAT(outcome->reason, !Contains("after training completed"));
  CHECK(finished.wait(std::chrono::seconds(10)) == 1);
  behind.wait(std::chrono::seconds(2));
}

TEST_CASE("the step watchdog names the stuck rank first and what the others wait for", "[actors]") {
  JobPlan plan = plan_of(3);
  plan.step_timeout = std::chrono::seconds(1);
  Job job(std::move(plan));
  auto waiting0 = NodeProcess::start(job.port, 0, "hang");
  auto stuck = NodeProcess::start(job.port, 1, "busy");
  auto waiting2 = NodeProcess::start(job.port, 2, "hang");
  auto outcome = job.outcome(std::chrono::seconds(20));
  REQUIRE(outcome);
  std::printf("%s\n", outcome->reason.c_str());
  CHECK(outcome->exit_code == 1);
  const std::string& r = outcome->reason;
  CHECK_THAT(r, Catch::StartsWith("no progress for") && Contains("(limit 1.0 s)"));
  CHECK(outcome->failure_kind == FailureKind::stall);
  CHECK(outcome->failed_nodes.empty());
  // plan_of gives node i the first rank i(i+1)/2: node 1 is rank 1, node 2 rank 3.
  const auto culprit = r.find("rank 1 (node 1"), victim0 = r.find("rank 0 (node 0"), victim2 = r.find("rank 3 (node 2");
  REQUIRE(culprit != std::string::npos);
  REQUIRE(victim0 != std::string::npos);
  REQUIRE(victim2 != std::string::npos);
  CHECK(culprit < victim0);
  CHECK_THAT(r.substr(culprit, victim0 - culprit), Contains("in step 1, not waiting for any message"));
  CHECK_THAT(r.substr(victim0), Contains("in step 1, waiting") && Contains("for a message that never comes"));
  for (auto* n : {&waiting0, &stuck, &waiting2}) CHECK(n->wait(std::chrono::seconds(10)) == 1);
}

TEST_CASE("a failure while running is answered by the survivors' rescue snapshot, and the job ends with its step",
          "[actors]") {
  JobPlan plan = plan_of(2);
  plan.rescue_timeout = std::chrono::seconds(20);
  Job job(std::move(plan));
  auto survivor = NodeProcess::start(job.port, 0, "rescue");
  auto failing = NodeProcess::start(job.port, 1, "fail");
  auto outcome = job.outcome(std::chrono::seconds(30));
  REQUIRE(outcome);
  INFO(outcome->reason);
  CHECK(outcome->exit_code == 1);
  CHECK(outcome->failure_kind == FailureKind::worker_exception);
  CHECK(outcome->failed_nodes == std::vector<int>{1});
  CHECK(outcome->rescued_step == 7);
  CHECK_THAT(outcome->reason, Contains("node 1 (localhost") && Contains("deliberate failure") &&
                                  Contains("; rescue snapshot of step 7 written"));
  CHECK(survivor.wait(std::chrono::seconds(10)) == 1);
  CHECK(failing.wait(std::chrono::seconds(10)) == 1);
}

TEST_CASE("a rescue no writer answers ends at the rescue timeout without a snapshot", "[actors]") {
  JobPlan plan = plan_of(2);
  plan.rescue_timeout = std::chrono::seconds(1);
  Job job(std::move(plan));
  auto silent = NodeProcess::start(job.port, 0, "hang");
  auto failing = NodeProcess::start(job.port, 1, "fail");
  auto outcome = job.outcome(std::chrono::seconds(30));
  REQUIRE(outcome);
  INFO(outcome->reason);
  CHECK(outcome->exit_code == 1);
  CHECK(outcome->failure_kind == FailureKind::worker_exception);
  CHECK(outcome->rescued_step == -1);
  CHECK_THAT(outcome->reason, Contains("deliberate failure; no rescue snapshot (not every writer answered within 1.0 s)"));
  CHECK(silent.wait(std::chrono::seconds(10)) == 1);
  CHECK(failing.wait(std::chrono::seconds(10)) == 1);
}

TEST_CASE("a rescue whose only writer is lost ends at once without a snapshot", "[actors]") {
  JobPlan plan = plan_of(3);
  plan.rescue_timeout = std::chrono::seconds(30);
  Job job(std::move(plan));
  // Node 0 (rank 0) is the lowest survivor of node 2's failure: it is asked, then killed.
  auto writer = NodeProcess::start(job.port, 0, "hang");
  auto other = NodeProcess::start(job.port, 1, "hang");
  auto failing = NodeProcess::start(job.port, 2, "fail");
  // The failure settles 0.5 s after the start.
  const auto [outcome, seconds] =
      outcome_after_signal(job, writer, SIGKILL, std::chrono::seconds(3), std::chrono::seconds(20));
  REQUIRE(outcome);
  INFO(outcome->reason);
  CHECK(seconds < 10.0);
  CHECK(outcome->exit_code == 1);
  CHECK(outcome->failure_kind == FailureKind::worker_exception);
  CHECK(outcome->rescued_step == -1);
  CHECK_THAT(outcome->reason, Contains("; no rescue snapshot (rank 0's node was lost)"));
  writer.wait(std::chrono::seconds(2));
  CHECK(other.wait(std::chrono::seconds(10)) == 1);
  CHECK(failing.wait(std::chrono::seconds(10)) == 1);
}

TEST_CASE("nodes that never join fail the job at the join deadline, named", "[actors]") {
  Job job(plan_of(2, std::chrono::milliseconds(1500)));
  auto only = NodeProcess::start(job.port, 0, "check");
  auto outcome = job.outcome(std::chrono::seconds(15));
  REQUIRE(outcome);
  CHECK(outcome->exit_code == 2);
  CHECK_THAT(outcome->reason, Contains("node 1 (localhost) did not join"));
  CHECK(outcome->failure_kind == FailureKind::join_timeout);
  CHECK(outcome->failed_nodes == std::vector<int>{1});
  CHECK(only.wait(std::chrono::seconds(10)).has_value());
}

TEST_CASE("every catalogue message without an actor handle survives serialization", "[actors]") {
  TroupeConfig cfg;
  caf::actor_system system{cfg};
  // join_msg and rescue_msg carry an actor handle, which only deserializes with the middleman's
  // proxy registry: they are pinned by cross-process tests instead (rescue_msg by
  // tests/apps/commands/test_drill.cpp's kill-node).
  auto r = round_trip(system, join_result_msg{false, "why"});
  CHECK((!r.accepted && r.reason == "why"));
  start_msg s{3,
              {node_entry{0, 0, 1, "a", {byte_blob{{9}}}, {device_group_id{1, 0, byte_blob{{1, 2, 3}}}}},
               node_entry{1, 1, 2, "b", {byte_blob{}, byte_blob{{7, 8}}}}}};
  auto s2 = round_trip(system, s);
  REQUIRE(s2.nodes.size() == 2);
  REQUIRE(s2.nodes[1].comm_addresses.size() == 2);
  CHECK((s2.world_size == 3 && s2.nodes[1].slots == 2 && s2.nodes[0].comm_addresses.at(0).bytes[0] == 9 &&
         s2.nodes[1].comm_addresses[1].bytes == std::vector<std::uint8_t>{7, 8}));
  REQUIRE(s2.nodes[0].device_group_ids.size() == 1);
  CHECK((s2.nodes[0].device_group_ids[0].group == 1 && s2.nodes[0].device_group_ids[0].leader_rank == 0 &&
         s2.nodes[0].device_group_ids[0].id.bytes == std::vector<std::uint8_t>{1, 2, 3}));
  CHECK(s2.nodes[1].device_group_ids.empty());
  CHECK((s2.batch_size == 0 && s2.grad_accum == 0));
  // After a grow in place: the batch split the replicas use now; and the job's recovery shape.
  start_msg grown{4, {}, 8, 1};
  grown.recovery = {RecoveryMode::in_place, 2, 1, 1, troupe::compute::ZeroStage::optimizer_state, true, troupe::comm::Compression::powersgd, true, true};
  grown.recovery.islands = 2;
  auto g2 = round_trip(system, grown);
  CHECK((g2.world_size == 4 && g2.batch_size == 8 && g2.grad_accum == 1));
  CHECK((g2.recovery.mode == RecoveryMode::in_place && g2.recovery.data_parallel == 2 && g2.recovery.zero == troupe::compute::ZeroStage::optimizer_state &&
         g2.recovery.device_backend && g2.recovery.compression == troupe::comm::Compression::powersgd &&
         g2.recovery.replaces_nodes && g2.recovery.checkpoints));
  CHECK(g2.recovery.islands == 2);
  CHECK(round_trip(system, start_msg{}).recovery.mode == RecoveryMode::restart);
  auto d = round_trip(system, node_done_msg{4, 3, "x", true});
  CHECK((d.node_index == 4 && d.exit_code == 3 && d.reason == "x" && d.threw));
  auto st = round_trip(system, stop_msg{1, "y"});
  CHECK((st.exit_code == 1 && st.reason == "y"));
  auto o = round_trip(
      system,
      job_outcome_msg{1, "z", FailureKind::node_lost, {1, 3}, 5, {3}});
  CHECK((o.exit_code == 1 && o.reason == "z" && o.failure_kind == FailureKind::node_lost &&
         o.failed_nodes == std::vector<int>{1, 3} && o.rescued_step == 5 && o.drop_nodes == std::vector<int>{3} &&
         !o.rejoin));
  CHECK(round_trip(system, job_outcome_msg{1, "rejoin", FailureKind::node_exit, {}, -1, {}, true}).rejoin);
  auto rd = round_trip(system, rescue_done_msg{2, 7, "disk full"});
  CHECK((rd.rank == 2 && rd.step == 7 && rd.error == "disk full"));
  // The in-place recovery's messages; recover_msg and recover_ready_msg carry actor handles and
  // are pinned by test_drill.cpp's kill-worker, across real processes.
  auto wf = round_trip(system, worker_failed_msg{1, 3, "boom", 9});
  CHECK((wf.node_index == 1 && wf.rank == 3 && wf.reason == "boom" && wf.steps_done == 9));
  auto rp = round_trip(system, recover_plan_msg{2, 41, {0, 2}, {1, 3}, {}});
  CHECK((rp.epoch == 2 && rp.steps == 41 && rp.donors == std::vector<int>{0, 2} &&
         rp.receivers == std::vector<int>{1, 3} && rp.replaced.empty()));
  // A lost node's process started again: its ranks' new addresses ride along.
  auto rr = round_trip(system, recover_plan_msg{3, 7, {0}, {1}, {node_entry{1, 1, 1, "h", {byte_blob{{4, 5}}}, {}}}});
  REQUIRE(rr.replaced.size() == 1);
  CHECK((rr.replaced[0].node_index == 1 && rr.replaced[0].first_rank == 1 && rr.replaced[0].slots == 1 &&
         rr.replaced[0].host == "h" && rr.replaced[0].comm_addresses.at(0).bytes == std::vector<std::uint8_t>{4, 5}));
  // No replica holds some rank's state: every rank rolls back to checkpoint step 6, no donors.
  auto rb = round_trip(system, recover_plan_msg{4, 6, {}, {}, {}, true});
  CHECK((rb.epoch == 4 && rb.steps == 6 && rb.rollback && rb.donors.empty() && rb.receivers.empty()));
  CHECK_FALSE(rp.rollback);
  auto rdn = round_trip(system, recover_done_msg{2, 3, 1234, 0.5, "lost"});
  CHECK((rdn.epoch == 2 && rdn.rank == 3 && rdn.bytes == 1234 && rdn.seconds == 0.5 && rdn.error == "lost" &&
         rdn.steps == -1));
  CHECK(round_trip(system, recover_done_msg{3, 1, 8, 0.1, "", 40}).steps == 40);
  // DiLoCo's settle: a rank's outer sums applied, to the job. islands_msg carries the job's actor
  // handle and is pinned by test_diloco_run.cpp's lost islands, across real processes.
  auto applied = round_trip(system, islands_applied_msg{5, 3, 7, 3});
  CHECK((applied.epoch == 5 && applied.rank == 3 && applied.applied == 7 && applied.islands == 3));
  auto h = round_trip(system, heartbeat_msg{5, {worker_beat{7, 12, 13, 0.75, "step 13", "the gradient sums", 2.5},
                                                 worker_beat{8, 1, 2, 0, "", "", 0}}});
  REQUIRE(h.workers.size() == 2);
  const worker_beat& w = h.workers[0];
  CHECK((h.node_index == 5 && w.rank == 7 && w.steps_done == 12 && w.progress == 13 && w.idle_seconds == 0.75 &&
         w.activity == "step 13" && w.waiting_for == "the gradient sums" && w.waiting_seconds == 2.5 &&
         h.workers[1].rank == 8));
}

TEST_CASE(
    "a heartbeat carries a step's figures across a serialization: compression, lr, grad norm, validation loss, "
    "the experts' token-slots, batch share, DiLoCo's syncs",
    "[actors][compression][moe]") {
  TroupeConfig cfg;
  caf::actor_system system{cfg};
  worker_beat worker{3, 9, 9, 0, "step 10", "", 0};
  worker.recent_steps = {step_beat{9,     1.5e9, 2.25, 3.5,  4096,    733184, 43376640,
                                   0.125, 3e-4,  1.75, true, 3.25,    3,      {5, 0, 7, 4, 4, 4},
                                   0.625, 0.21,  2,    5,    1630000, 12}};
  auto h = round_trip(system, heartbeat_msg{1, {worker}});
  REQUIRE(h.workers.size() == 1);
  REQUIRE(h.workers[0].recent_steps.size() == 1);
  const step_beat& s = h.workers[0].recent_steps[0];
  CHECK((s.step == 9 && s.start_unix_seconds == 1.5e9 && s.seconds == 2.25 && s.loss == 3.5 && s.tokens == 4096 &&
         s.wire_bytes == 733184 && s.plain_bytes == 43376640 && s.compress_seconds == 0.125));
  // ... and its learning rate, gradient norm and the validation after it (the job's web page draws them).
  CHECK((s.lr == 3e-4 && s.grad_norm == 1.75 && s.validated && s.val_loss == 3.25));
  // ... and, with experts, its token-slots per MoE block and expert (the shell's experts).
  CHECK(s.experts == 3);
  CHECK(s.expert_slots == std::vector<std::int64_t>{5, 0, 7, 4, 4, 4});
  // ... and its replica's share of the global batch and measured time per micro-batch (train.balance).
  CHECK((s.batch_share == 0.625 && s.micro_batch_seconds == 0.21));
  // ... and DiLoCo's islands, outer syncs, the newest sync's bytes and the next sync's step (the shell's status).
  CHECK((s.islands == 2 && s.outer_syncs == 5 && s.outer_bytes == 1630000 && s.next_sync_step == 12));
}

TEST_CASE("a heartbeat carries what its workers noted for the job's events across a serialization",
          "[actors][events]") {
  TroupeConfig cfg;
  caf::actor_system system{cfg};
  worker_beat worker{0, 4, 4, 0, "step 5", "", 0};
  worker.notices = {{troupe::monitor::NoticeKind::checkpoint_skipped, 40, 1.7e9, "skipped step-0000040: hash"},
                    {troupe::monitor::NoticeKind::resumed, 20, 1.7e9 + 1, "ckpt/step-0000020"}};
  auto h = round_trip(system, heartbeat_msg{0, {worker}});
  REQUIRE(h.workers.at(0).notices.size() == 2);
  const worker_notice& n = h.workers[0].notices[0];
  CHECK((n.kind == troupe::monitor::NoticeKind::checkpoint_skipped && n.step == 40 && n.unix_seconds == 1.7e9 &&
         n.detail == "skipped step-0000040: hash"));
  CHECK((h.workers[0].notices[1].kind == troupe::monitor::NoticeKind::resumed && h.workers[0].notices[1].step == 20));
}

TEST_CASE("a heartbeat carries its node's memory by kind across a serialization", "[actors]") {
  TroupeConfig cfg;
  caf::actor_system system{cfg};
  heartbeat_msg beat{2, {}};
  beat.memory = {{"host", "parameters", 3 << 20, 3 << 20}, {"host", "total", 5'000'000'000, 6'000'000'000}};
  beat.resident_bytes = 5'100'000'000;
  beat.peak_resident_bytes = 6'200'000'000;
  auto h = round_trip(system, beat);
  REQUIRE(h.memory.size() == 2);
  CHECK((h.memory[0].device == "host" && h.memory[0].kind == "parameters" && h.memory[0].bytes == (3 << 20) &&
         h.memory[0].peak == (3 << 20)));
  CHECK((h.memory[1].kind == "total" && h.memory[1].bytes == 5'000'000'000 && h.memory[1].peak == 6'000'000'000));
  CHECK((h.resident_bytes == 5'100'000'000 && h.peak_resident_bytes == 6'200'000'000));
}
