// The shell's reports (actors/monitor/monitor_report.hpp) over a job view: the grid line names every
// axis, and `workers` places every rank on the dp × pp × tp grid (comm/grid.hpp's order).

#include <catch2/catch.hpp>

#include <regex>

#include "actors/monitor/monitor_report.hpp"

using namespace troupe::actors;
using Catch::Contains;

TEST_CASE("workers names each rank's replica, stage and tensor shard", "[monitor]") {
  MonitorPlan plan;
  plan.world_size = 8;
  plan.dp = 2;
  plan.pp = 2;
  plan.tp = 2;
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
  const std::string text = workers_text(plan, view);
  CHECK_THAT(text, Contains("rank  node   dp  pp  tp   steps  activity"));
  // rank = tp + 2·(dp + 2·pp): rank 5 is shard 1 of replica 0 on stage 1, rank 2 shard 0 of replica 1.
  CHECK(std::regex_search(text, std::regex("\n5 +1 +0 +1 +1 +3  step 4")));
  CHECK(std::regex_search(text, std::regex("\n2 +0 +1 +0 +0 +3  step 4")));
}
