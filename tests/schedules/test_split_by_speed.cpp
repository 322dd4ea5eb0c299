// Stage speeds in the simulator and the layout planner: a stage at half speed takes twice as long
// for the same layers, so a pipeline split balanced over a fast and a slow stage runs at the slow
// stage's pace, and the split by speed (compute::split_layers_by_speed) wins by the ratio of the
// two splits' slowest stage times, which the simulator and the planner both predict.

#include <catch2/catch.hpp>

#include <algorithm>

#include "compute/model/stage_split.hpp"
#include "schedules/generate.hpp"
#include "schedules/layout_plan.hpp"
#include "schedules/simulator.hpp"

using namespace troupe;
using namespace troupe::schedules;

namespace {

constexpr int seq_len = 256;

compute::GPTConfig twelve_layers() {
  compute::GPTConfig model = compute::gpt_preset("small").value();
  model.n_layer = 12;
  return model;
}

// Each stage's share of the model's compute per token over the mean stage's.
std::vector<double> work_scale(const compute::GPTConfig& model, const std::vector<compute::StageLayers>& split) {
  std::vector<double> work;
  for (const compute::StageLayers& l : split)
    work.push_back(compute::stage_compute_per_token(model, seq_len, l.first_layer, l.last_layer));
  double mean = 0;
  for (double w : work) mean += w / static_cast<double>(work.size());
  for (double& w : work) w /= mean;
  return work;
}

// The slowest stage's time, in mean stages at speed 1: what a long pipeline's step is paced by.
double slowest(const std::vector<double>& work, const std::vector<double>& speeds) {
  double most = 0;
  for (std::size_t s = 0; s < work.size(); ++s) most = std::max(most, work[s] / speeds[s]);
  return most;
}

Simulation simulate_split(const std::vector<double>& work, const std::vector<double>& speeds, int m) {
  CostModel costs;
  costs.forward_scale = work;
  costs.backward_scale = work;
  costs.speeds = speeds;
  auto sim = simulate(generate_schedule(ScheduleKind::one_f_one_b, 2, m).value(), costs);
  REQUIRE(sim);
  return *sim;
}

}  // namespace

TEST_CASE("a stage at half speed takes as long as one with twice the work", "[simulator][speed]") {
  const Schedule schedule = generate_schedule(ScheduleKind::one_f_one_b, 2, 6).value();
  CostModel slow;
  slow.speeds = {1.0, 0.5};
  CostModel heavy;
  heavy.forward_scale = {1.0, 2.0};
  heavy.backward_scale = {1.0, 2.0};
  const Simulation by_speed = simulate(schedule, slow).value();
  const Simulation by_work = simulate(schedule, heavy).value();
  CHECK(by_speed.makespan == by_work.makespan);
  CHECK(by_speed.busy == by_work.busy);
  CHECK(by_speed.busy[1] == 2 * simulate(schedule, CostModel{}).value().busy[1]);

  CostModel wrong;
  wrong.speeds = {1.0};
  CHECK(simulate(schedule, wrong).error().message == "simulate: speeds has 1 entries for 2 stages");
  wrong.speeds = {1.0, 0.0};
  CHECK(simulate(schedule, wrong).error().message == "simulate: every stage's speed must be a positive number");
}

TEST_CASE("with a stage at half speed the simulator predicts the split by speed faster by the slowest stages' ratio",
          "[simulator][speed]") {
  const compute::GPTConfig model = twelve_layers();
  const std::vector<double> speeds{1.0, 0.5};
  const auto balanced = work_scale(model, compute::split_layers(model, 2).value());
  const auto by_speed = work_scale(model, compute::split_layers_by_speed(model, seq_len, speeds).value());
  const double expected = slowest(balanced, speeds) / slowest(by_speed, speeds);
  CHECK(expected > 1.2);  // the slow stage held half the work; by speed it holds about a third
  // Many micro-batches: the steady state, where the slowest stage sets the pace, outweighs the fill
  // and drain.
  const int m = 64;
  const double predicted = simulate_split(balanced, speeds, m).flush / simulate_split(by_speed, speeds, m).flush;
  CHECK(predicted == Approx(expected).epsilon(0.03));
  // At equal speeds the balanced split is the faster (or as fast): speed only helps where it differs.
  CHECK(simulate_split(balanced, {1, 1}, m).flush <= simulate_split(by_speed, {1, 1}, m).flush);
}

TEST_CASE("the planner ranks the split by declared speeds with its predicted step time", "[plan][speed]") {
  Workload w{twelve_layers(), 16, seq_len, Precision::fp32};
  w.stage_speeds = {1.0, 0.5};
  Cluster cluster;
  cluster.devices_per_node = 2;
  cluster.device_memory = 1e12;
  cluster.peak_flops = 100e9;
  cluster.memory_bandwidth = 14e9;
  cluster.intra_bandwidth = 6e9;
  cluster.inter_bandwidth = 1e9;
  Layout layout{1, 1, 2};
  layout.micro_batch = 1;
  layout.microbatches = 16;
  const PlannedLayout balanced = plan_layout(w, cluster, layout).value();
  layout.split = compute::SplitMethod::speed;
  const PlannedLayout by_speed = plan_layout(w, cluster, layout).value();
  CHECK(describe(by_speed.layout).find("pp 2 1f1b by speed") != std::string::npos);
  CHECK(describe(balanced.layout).find("by speed") == std::string::npos);
  // The compute of the slowest stage, and the span with its bubble, shrink by the slowest stages' ratio.
  const std::vector<double> speeds = w.stage_speeds;
  const double expected =
      slowest(work_scale(w.model, compute::split_layers(w.model, 2).value()), speeds) /
      slowest(work_scale(w.model, compute::split_layers_by_speed(w.model, seq_len, speeds).value()), speeds);
  CHECK(balanced.time.compute / by_speed.time.compute == Approx(expected).epsilon(1e-9));
  CHECK(balanced.time.total / by_speed.time.total == Approx(expected).epsilon(0.1));

  // Every layout planned has the speeds' two stages, and the fastest is split by them.
  const Plan plan = plan_layouts(w, cluster).value();
  REQUIRE(!plan.feasible.empty());
  for (const PlannedLayout& p : plan.feasible) CHECK(p.layout.pp == 2);
  CHECK(plan.feasible.front().layout.split == compute::SplitMethod::speed);

  Workload wrong = w;
  wrong.stage_speeds = {1.0};
  CHECK(check_plan_inputs(wrong, cluster).error().message ==
        "stage speeds: one speed a pipeline stage, and at least 2 stages");
  wrong.stage_speeds = {1.0, -0.5};
  CHECK(check_plan_inputs(wrong, cluster).error().message == "a stage speed must be positive, got -0.5");
  wrong.stage_speeds = {1.0, 1.0, 1.0};
  CHECK(plan_layouts(wrong, cluster).error().message == "3 stage speeds: 2 devices do not form 3 pipeline stages");
}
