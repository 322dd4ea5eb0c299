// The simulator under ops that vary (schedules/cost_spread.hpp): at no spread every trial is the
// fixed-cost simulation; a spread adds idle time on average, the more the tighter the schedule
// (ZB-H1's bubble grows against 1F1B's); the same seed draws the same figures; bad arguments
// are refused.

#include <catch2/catch.hpp>

#include "schedules/cost_spread.hpp"
#include "schedules/generate.hpp"

using namespace troupe::schedules;

namespace {

Schedule generated(ScheduleKind kind) {
  auto schedule = generate_schedule(kind, 2, 8, 1);
  REQUIRE(schedule.ok());
  return *schedule;
}

// This CPU's costs for `small` on 2 stages, in ms: F 136, B + W 277 (W 0.45 of it), 0.6 ms a message.
CostModel measured_costs() {
  CostModel costs;
  costs.forward = 136;
  costs.backward = 277;
  costs.weight_share = 0.45;
  costs.latency = 0.6;
  return costs;
}

SpreadBubble spread_bubble(const Schedule& schedule, double spread, std::uint64_t seed = 1) {
  auto result = simulate_with_spread(schedule, measured_costs(), spread, 300, seed);
  REQUIRE(result.ok());
  return *result;
}

}  // namespace

TEST_CASE("at no spread every trial is the simulation at fixed costs", "[simulator]") {
  for (ScheduleKind kind : {ScheduleKind::one_f_one_b, ScheduleKind::zb_h1}) {
    const Schedule schedule = generated(kind);
    auto fixed = simulate(schedule, measured_costs());
    REQUIRE(fixed.ok());
    const SpreadBubble none = spread_bubble(schedule, 0.0);
    CHECK(none.mean == Approx(fixed->bubble).epsilon(1e-12));
    CHECK(none.low == Approx(fixed->bubble).epsilon(1e-12));
    CHECK(none.high == Approx(fixed->bubble).epsilon(1e-12));
  }
}

TEST_CASE("ops that vary add idle time and cost the tighter schedule more", "[simulator]") {
  const Schedule one_f_one_b = generated(ScheduleKind::one_f_one_b), zb_h1 = generated(ScheduleKind::zb_h1);
  const SpreadBubble f0 = spread_bubble(one_f_one_b, 0.0), f1 = spread_bubble(one_f_one_b, 0.15);
  const SpreadBubble h0 = spread_bubble(zb_h1, 0.0), h1 = spread_bubble(zb_h1, 0.15);
  // A slow op idles its neighbour; a fast one gives back less than that, the neighbour having its
  // own ops to finish: on average the bubble grows, by more than a tenth of itself at 0.15.
  CHECK(f1.mean > 1.1 * f0.mean);
  CHECK(h1.mean > 1.1 * h0.mean);
  CHECK(f1.low <= f1.mean);
  CHECK(f1.mean <= f1.high);
  CHECK(f1.low < f1.high);
  // ZB-H1 leaves less slack than 1F1B: the same spread moves its bubble nearer to 1F1B's.
  CHECK(h1.mean / f1.mean > h0.mean / f0.mean + 0.02);
  // The same seed, the same draws; another seed, others.
  CHECK(spread_bubble(zb_h1, 0.15).mean == h1.mean);
  CHECK(spread_bubble(zb_h1, 0.15, 2).mean != h1.mean);
}

TEST_CASE("simulate_with_spread refuses a negative spread, no trials and op costs given already", "[simulator]") {
  const Schedule schedule = generated(ScheduleKind::one_f_one_b);
  CHECK(!simulate_with_spread(schedule, measured_costs(), -0.1, 10).ok());
  CHECK(!simulate_with_spread(schedule, measured_costs(), 0.1, 0).ok());
  CostModel with_op_costs = measured_costs();
  with_op_costs.op_costs.assign(2, std::vector<double>(schedule.streams[0].size(), 1.0));
  auto refused = simulate_with_spread(schedule, with_op_costs, 0.1, 10);
  REQUIRE(!refused.ok());
  CHECK(refused.error().message == "simulate_with_spread: costs with op_costs already");
}
