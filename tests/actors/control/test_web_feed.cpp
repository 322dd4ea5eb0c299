// The web page's view of a job (actors/control/web_feed.hpp): the job's typed events and the
// supervisor's view make each rank's state — lost when a failure names it or its node, recovering
// once a recovery is chosen, training again when it resumes, straggling when named, waiting with
// the message it waits for — the timeline with each recovery's path, seconds and bytes, the
// recoveries by path and the curves; and the feed writes the timeline to TensorBoard's job run.

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "actors/control/web_feed.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::actors;
using troupe::monitor::RankState;

namespace {

constexpr double now = 1'000'000;

// 4 ranks, dp 2 × pp 2, two per node.
MonitorPlan four_ranks() {
  MonitorPlan plan;
  plan.world_size = 4;
  plan.dp = 2;
  plan.pp = 2;
  plan.total_steps = 100;
  return plan;
}

job_view_msg view_of_two_nodes() {
  job_view_msg view;
  view.running = true;
  for (int node = 0; node < 2; ++node) {
    node_view n;
    n.node_index = node;
    n.host = "h" + std::to_string(node);
    n.heard_seconds_ago = 0.5 + node;
    n.memory = {{"host", "parameters", 1000, 2000}};
    n.resident_bytes = 5000;
    for (int slot = 0; slot < 2; ++slot) {
      worker_beat w;
      w.rank = 2 * node + slot;
      w.steps_done = 7;
      w.activity = "step 8";
      n.workers.push_back(w);
    }
    view.nodes.push_back(n);
  }
  return view;
}

job_event event(std::int64_t seq, job_event_body body) { return {seq, now - 100 + seq, 1, std::move(body)}; }

std::vector<RankState> states(const troupe::monitor::JobSnapshot& s) {
  std::vector<RankState> out;
  for (const auto& tile : s.ranks) out.push_back(tile.state);
  return out;
}

}  // namespace

TEST_CASE("context shards are their own axis of the grid: replica and shard from the comm grid's dp axis", "[web]") {
  MonitorPlan plan = four_ranks();  // the comm grid's dp axis of 2 holds 1 replica of 2 context shards
  plan.cp = 2;
  const auto s = web_snapshot(plan, view_of_two_nodes(), {}, EventFold{}, now);
  REQUIRE(s.axes.size() == 4);
  CHECK((s.axes[0].name == "dp" && s.axes[0].size == 1 && s.axes[1].name == "cp" && s.axes[1].size == 2 &&
         s.axes[2].name == "pp" && s.axes[2].size == 2 && s.axes[3].name == "tp" && s.axes[3].size == 1));
  // rank = dp + 2·pp on the comm grid: rank 1 is context shard 1 of stage 0, rank 2 shard 0 of stage 1.
  CHECK(s.ranks[1].at == std::vector{0, 1, 0, 0});
  CHECK(s.ranks[2].at == std::vector{0, 0, 1, 0});
  CHECK(s.ranks[3].at == std::vector{0, 1, 1, 0});
}

TEST_CASE("a failure makes its node's ranks lost, the chosen recovery recovering, and the resume training again",
          "[web]") {
  const MonitorPlan plan = four_ranks();
  job_view_msg view = view_of_two_nodes();
  view.nodes[0].workers[0].waiting_for = "activations of micro-batch 2 from rank 2";
  EventFold fold;
  CHECK_FALSE(fold.take(event(1, step_trained{7, 4.5})));
  CHECK(fold.step == 7);

  auto s = web_snapshot(plan, view, {}, fold, now);
  CHECK(states(s) == std::vector{RankState::waiting, RankState::training, RankState::training, RankState::training});
  CHECK(s.ranks[0].waiting_for == "activations of micro-batch 2 from rank 2");
  CHECK(s.ranks[3].heard_seconds_ago == 1.5);
  // rank = tp + tp·(dp + dp·pp): rank 2 is stage 1 of replica 0, at (dp, pp, tp) = (0, 1, 0).
  REQUIRE(s.axes.size() == 3);
  CHECK((s.axes[0].name == "dp" && s.axes[0].size == 2 && s.axes[1].name == "pp" && s.axes[1].size == 2 &&
         s.axes[2].name == "tp" && s.axes[2].size == 1));
  CHECK(s.ranks[2].at == std::vector{0, 1, 0});
  CHECK(s.ranks[1].at == std::vector{1, 0, 0});
  CHECK(s.loss == 4.5);

  CHECK(fold.take(event(2, failure_detected{troupe::actors::FailureKind::node_exit, {1}, {}, "node 1 exited"})));
  s = web_snapshot(plan, view, {}, fold, now);
  CHECK(states(s) == std::vector{RankState::waiting, RankState::training, RankState::lost, RankState::lost});
  CHECK(s.ranks[2].state_seconds == 98);  // lost since the failure's event (now - 100 + 2)
  CHECK(s.ranks[0].state_seconds == -1);

  CHECK(fold.take(event(3, recovery_chosen{RecoveryRoute::in_place_from_replica, 1, {1}, "respawn node 1"})));
  CHECK(fold.take(event(4, state_moved{RecoveryRoute::in_place_from_replica, 1, 123456, 0.25, {0}, {2}})));
  s = web_snapshot(plan, view, {}, fold, now);
  CHECK(states(s)[2] == RankState::recovering);
  CHECK(states(s)[3] == RankState::recovering);
  CHECK(s.ranks[3].state_seconds == 97);  // recovering since the recovery was chosen
  // While the recovery lasts, a lost process's ranks (its failure names them) stay recovering,
  // though they left the job's view (no heartbeat comes until the new process joins).
  EventFold exited;
  CHECK(exited.take(event(2, failure_detected{troupe::actors::FailureKind::node_exit, {1}, {2, 3}, "node 1 exited"})));
  CHECK(exited.take(event(3, recovery_chosen{RecoveryRoute::in_place_from_replica, 1, {1}, "respawn node 1"})));
  job_view_msg gone = view;
  gone.nodes[1].workers.clear();
  const auto during = web_snapshot(plan, gone, {}, exited, now + 5);
  CHECK(states(during) ==
        std::vector{RankState::waiting, RankState::training, RankState::recovering, RankState::recovering});
  CHECK(during.ranks[3].state_seconds == 102);

  training_resumed resumed;
  resumed.route = RecoveryRoute::in_place_from_replica;
  resumed.after_step = 7;
  resumed.seconds = 1.75;
  CHECK(fold.take(event(5, resumed)));
  s = web_snapshot(plan, view, {}, fold, now);
  CHECK(states(s)[2] == RankState::training);
  CHECK(s.ranks[2].state_seconds == -1);
  CHECK(s.ranks[2].recoveries == 1);  // node 1's ranks were lost and came back
  CHECK(s.ranks[3].recoveries == 1);
  CHECK(s.ranks[0].recoveries == 0);
  CHECK(s.recoveries_by_path == std::map<std::string, long>{{"in_place_from_replica", 1}});

  REQUIRE(s.timeline.size() == 4);
  CHECK(s.timeline[0].kind == "failure_detected");
  CHECK(s.timeline[2].kind == "state_moved");
  CHECK(s.timeline[2].bytes == 123456);
  CHECK(s.timeline[2].seconds == 0.25);
  CHECK(s.timeline[3].route == "in_place_from_replica");
  CHECK(s.timeline[3].seconds == 1.75);
  CHECK_THAT(s.timeline[0].text, Catch::Contains("node 1 exited"));
}

TEST_CASE("a named straggler shows while the naming is recent, and a committed checkpoint dates the last one",
          "[web]") {
  const MonitorPlan plan = four_ranks();
  const job_view_msg view = view_of_two_nodes();
  EventFold fold;
  CHECK(fold.take(job_event{1, now - 1, 1, straggler_named{3, 1, 0.05, 0.9}}));
  CHECK(fold.take(event(2, checkpoint_noted{CheckpointOutcome::committed, 0, 10, "ckpt/step-0000010"})));
  CHECK(fold.last_checkpoint_unix_seconds == now - 98);
  CHECK(states(web_snapshot(plan, view, {}, fold, now))[3] == RankState::straggling);
  CHECK(states(web_snapshot(plan, view, {}, fold, now - 1 + WebFeed::straggler_memory_seconds))[3] ==
        RankState::training);
}

TEST_CASE("the curves come from rank 0's steps: loss, validation loss, lr, grad norm and tokens per second", "[web]") {
  StepHistory history;
  history[0][1] = step_beat{1, now, 0.5, 5.0, 1000, 0, 0, 0, 3e-4, 2.5};
  history[0][2] = step_beat{2, now, 0.25, 4.0, 1000, 0, 0, 0, 2e-4, 1.5, true, 4.25};
  history[1][2] = step_beat{2, now, 9, 9, 9, 0, 0, 0, 9, 9};
  const auto s = web_snapshot(four_ranks(), view_of_two_nodes(), history, EventFold{}, now);
  REQUIRE(s.curve.size() == 2);
  CHECK(s.curve[1].loss == 4.0);
  CHECK(s.curve[1].lr == 2e-4);
  CHECK(s.curve[1].grad_norm == 1.5);
  CHECK(s.curve[1].tokens_per_second == 4000);
  CHECK_FALSE(s.curve[0].val_loss.has_value());  // no validation ran after step 1
  CHECK(s.curve[1].val_loss == 4.25);
  CHECK(s.tokens_per_second == 4000);
  REQUIRE(s.memory.size() == 2);
  CHECK(s.memory[1].memory[0].kind == "parameters");
  CHECK(s.memory[1].resident_bytes == 5000);
}

TEST_CASE("the feed writes the job's timeline to TensorBoard's job run as text", "[web][tensorboard]") {
  troupe::test::TempDir dir;
  JobEvents events;
  MonitorOptions options;
  options.web_port = -1;
  options.tensorboard_dir = (dir.path() / "tb").string();
  auto feed = WebFeed::open(options, "token", &events);
  REQUIRE(feed);
  events.emit(1, step_trained{3, 4.0});
  events.emit(1, failure_detected{troupe::actors::FailureKind::node_exit, {1}, {}, "node 1 exited with code 9"});
  (*feed)->update(four_ranks(), view_of_two_nodes(), {});
  std::vector<std::filesystem::path> files;
  for (const auto& e : std::filesystem::directory_iterator(dir.path() / "tb" / "job")) files.push_back(e.path());
  REQUIRE(files.size() == 1);
  std::ifstream in(files[0], std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  CHECK_THAT(bytes, Catch::Contains("node 1 exited with code 9"));
  CHECK_THAT(bytes, !Catch::Contains("step_trained"));
  CHECK((*feed)->port() == -1);
}
