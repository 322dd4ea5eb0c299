// The shell's reports (actors/control/monitor_report.hpp) over a job view: the grid line names every
// axis, `workers` places every rank on the dp × pp × tp grid (comm/grid.hpp's order), and `status`
// says where each recovery's state came from.

#include <catch2/catch.hpp>

#include <regex>

#include "actors/control/monitor_report.hpp"

using namespace troupe::actors;
using Catch::Contains;

TEST_CASE("top shows a compressing rank's bytes per step against the uncompressed bytes, and its compress time",
          "[monitor][compression]") {
  const MonitorPlan plan{.total_steps = 10, .world_size = 2, .dp = 2};
  job_view_msg view;
  node_view n;
  n.node_index = 0;
  for (int rank = 0; rank < 2; ++rank) {
    worker_beat w;
    w.rank = rank;
    w.steps_done = 3;
    w.activity = "step 4";
    n.workers.push_back(w);
  }
  view.nodes.push_back(n);
  StepHistory history;
  history[0][3] = step_beat{3, 0, 2.0, 3.25, 4096, 0, 0, 0};
  history[1][3] = step_beat{3, 0, 2.0, 3.25, 4096, 0, 0, 0};
  const std::string plain = top_text(plan, view, history, {}).value();
  CHECK_FALSE(Contains("sums MB").match(plain));
  history[0][3] = step_beat{3, 0, 2.0, 3.25, 4096, 733184, 43376640, 0.0125};
  const std::string compressed = top_text(plan, view, history, {}).value();
  INFO(compressed);
  CHECK_THAT(compressed, Contains("sums MB/plain MB") && Contains("compress ms"));
  CHECK(std::regex_search(compressed,
                          std::regex("\n0 +0 +3 +3.2500 +2000.0 +2048 +[0-9.]+ +0.73/43.38 +12.5  step 4")));
  CHECK(std::regex_search(compressed, std::regex("\n1 +0 +3 +3.2500 +2000.0 +2048 +[0-9.]+ +- +-  step 4")));
}

TEST_CASE("workers names each rank's replica, stage and tensor shard", "[monitor]") {
  const MonitorPlan plan{.world_size = 8, .dp = 2, .pp = 2, .tp = 2};
  job_view_msg view;
  for (int node = 0; node < 2; ++node) {
    node_view n;
    n.node_index = node;
    for (int slot = 0; slot < 4; ++slot) {
      worker_beat w;
      w.rank = node * 4 + slot;
      w.steps_done = 3;
      w.activity = "step 4";
      n.workers.push_back(w);
    }
    view.nodes.push_back(n);
  }
  const std::string text = workers_text(plan, view).value();
  CHECK_THAT(text, Contains("rank  node   dp  pp  tp   steps  activity"));
  // rank = tp + 2·(dp + 2·pp): rank 5 is shard 1 of replica 0 on stage 1, rank 2 shard 0 of replica 1.
  CHECK(std::regex_search(text, std::regex("\n5 +1 +0 +1 +1 +3  step 4")));
  CHECK(std::regex_search(text, std::regex("\n2 +0 +1 +0 +0 +3  step 4")));
}

TEST_CASE("workers shows each replica's share of the global batch and its measured time per micro-batch",
          "[monitor][balance]") {
  const MonitorPlan plan{.world_size = 2, .dp = 2};
  job_view_msg view;
  const double shares[] = {0.625, 0.375}, seconds[] = {0.21, 0.4};
  for (int rank = 0; rank < 2; ++rank) {
    node_view n;
    n.node_index = rank;
    worker_beat w;
    w.rank = rank;
    w.steps_done = 23;
    w.activity = "step 24";
    step_beat last;
    last.step = 23;
    last.batch_share = shares[rank];
    last.micro_batch_seconds = seconds[rank];
    w.recent_steps = {step_beat{}, last};
    n.workers.push_back(w);
    view.nodes.push_back(n);
  }
  const std::string text = workers_text(plan, view).value();
  INFO(text);
  CHECK_THAT(text, Contains("rank  node   dp  pp  tp   steps   share  ms/micro  activity"));
  CHECK(std::regex_search(text, std::regex("\n0 +0 +0 +0 +0 +23 +62.5 % +210.0  step 24")));
  CHECK(std::regex_search(text, std::regex("\n1 +1 +1 +0 +0 +23 +37.5 % +400.0  step 24")));
  // An even split without measurements adds no columns.
  for (node_view& n : view.nodes)
    for (worker_beat& w : n.workers) {
      w.recent_steps.back() = step_beat{};
      w.recent_steps.back().step = 23;
      w.recent_steps.back().batch_share = 0.5;
    }
  CHECK_THAT(workers_text(plan, view).value(), Contains("rank  node   dp  pp  tp   steps  activity"));
}

TEST_CASE(
    "status lists, from the job's events, a recovery from a replica by its donor, a rollback by the "
    "checkpoint every rank read, and a grow",
    "[monitor][rollback]") {
  const MonitorPlan plan{.total_steps = 12, .world_size = 2, .pp = 2};
  job_view_msg view;
  view.running = true;
  JobEvents events;
  using Route = RecoveryRoute;
  events.emit(0, state_moved{Route::in_place_from_replica, 1, 5200000, 0.1, {0}, {1}});
  events.emit(0, training_resumed{Route::in_place_from_replica, 1, 4, "rank 0's memory", {1}, {}, {}, 0.25});
  events.emit(1, state_moved{Route::in_place_rollback, 2, 10500000, 0.2, {}, {0, 1}});
  events.emit(1, training_resumed{Route::in_place_rollback, 2, 6, "checkpoint step 6", {0}, {1}, {4711}, 0.5});
  events.emit(3, state_moved{Route::in_place_from_replica, 3, 20200000, 0.3, {0, 3}, {2, 1}});
  events.emit(3, training_resumed{
                     Route::in_place_from_replica, 3, 8, "ranks 0, 3's memory", {2, 1}, {1, 2}, {4712, 4713}, 0.75});
  events.emit(3, step_trained{9, 2.5});
  events.emit(4, state_moved{Route::grow_in_place, 4, 7000000, 0.1, {0}, {2}});
  events.emit(4, training_resumed{Route::grow_in_place, 4, 9, "rank 0's memory", {2}, {1}, {}, 0.4});
  const std::string status = status_text(plan, view, {}, {}, events.since(0));
  INFO(status);
  CHECK_THAT(status, Contains("recovery  in place (epoch 1) in 0.250 s: rank 1 respawned in its process, 5.2 MB of "
                              "state from rank 0; went on after step 4") &&
                         Contains("recovery  in place (epoch 2) in 0.500 s: rank 0 respawned in a new process of its "
                                  "node, every rank rolled back to checkpoint step 6 (10.5 MB read); went on after "
                                  "step 6") &&
                         Contains("recovery  in place (epoch 3) in 0.750 s: ranks 2, 1 respawned in 2 new node "
                                  "processes, 20.2 MB of state from rank 0; went on after step 8") &&
                         Contains("grow      in place (epoch 4) in 0.400 s: rank 2 joined in 1 new node process(es), "
                                  "7.0 MB of state from rank 0; went on after step 9"));
}

TEST_CASE("experts gives each MoE block's share per expert and max/mean over every rank's newest step",
          "[monitor][moe]") {
  StepHistory history;
  CHECK_THAT(experts_text(history), Contains("no step with experts reported yet"));
  job_view_msg view;
  node_view n;
  for (int rank = 0; rank < 2; ++rank) {
    worker_beat w;
    w.rank = rank;
    // Two MoE blocks of 4 experts; step 6 then 7, whose routing is the one counted.
    step_beat older{6, 0, 1.0, 3.0, 512};
    older.experts = 4;
    older.expert_slots = {100, 0, 0, 0, 25, 25, 25, 25};
    step_beat newest{7, 1, 1.0, 3.0, 512};
    newest.experts = 4;
    newest.expert_slots = rank == 0 ? std::vector<std::int64_t>{40, 30, 20, 10, 25, 25, 25, 25}
                                    : std::vector<std::int64_t>{40, 10, 0, 50, 25, 25, 25, 25};
    w.recent_steps = {older, newest};
    n.workers.push_back(w);
  }
  view.nodes.push_back(n);
  remember_steps(history, view);
  // Only the newest step keeps its routing.
  CHECK(history.at(0).at(6).expert_slots.empty());
  CHECK(history.at(1).at(7).expert_slots.size() == 8);
  const std::string text = experts_text(history);
  INFO(text);
  CHECK_THAT(text, Contains("experts at step 7 over 2 rank(s)' tokens"));
  // Block 0 over both ranks: 80, 40, 20, 60 of 200 slots; the most, 80, over the mean 50 is 1.60.
  CHECK(std::regex_search(text, std::regex("\n +0 +200 +1\\.60 +40\\.0% +20\\.0% +10\\.0% +30\\.0%")));
  CHECK(std::regex_search(text, std::regex("\n +1 +200 +1\\.00 +25\\.0% +25\\.0% +25\\.0% +25\\.0%")));
}

TEST_CASE("status shows a DiLoCo run's islands, outer syncs, the last sync's bytes and the next sync's step",
          "[monitor][diloco]") {
  const MonitorPlan plan{.total_steps = 100, .world_size = 2, .dp = 2};
  job_view_msg view;
  view.running = true;
  StepHistory history;
  history[0][7] = step_beat{7, 0, 1.0, 3.0, 512};
  CHECK_FALSE(Contains("diloco").match(status_text(plan, view, history, {}, {})));
  history[0][7].islands = 2;
  history[0][7].next_sync_step = 20;
  CHECK_THAT(status_text(plan, view, history, {}, {}),
             Contains("\ndiloco    2 island(s) present; no outer sync yet; next after step 20\n"));
  step_beat synced{61, 1, 1.0, 2.5, 512};
  synced.islands = 2;
  synced.outer_syncs = 3;
  synced.outer_bytes = 1630000;
  synced.next_sync_step = 80;
  history[0][61] = synced;
  const std::string status = status_text(plan, view, history, {}, {});
  INFO(status);
  CHECK_THAT(status, Contains("\ndiloco    2 island(s) present; 3 outer sync(s), the last 1.63 MB sent by each rank; "
                              "next after step 80\nETA"));
  history[0][100] = synced;
  history[0][100].step = 100;
  history[0][100].next_sync_step = 0;
  CHECK_THAT(status_text(plan, view, history, {}, {}), Contains("; none to come\n"));
}
