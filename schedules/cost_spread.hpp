#pragma once
// The simulator under ops that vary (`troupe schedule --cost-spread`). A schedule that leaves a
// stage no slack turns every op that runs long into idle time on its neighbours, so on a machine
// where the same op takes a different time at each run its bubble is above the one at fixed costs,
// and the more so the less slack it has. Each trial draws every forward, B and W anew: its cost
// (stream_cost, simulator.hpp) times exp(N(0, spread²)), a log-normal factor whose median is 1, so
// costs stay positive and a spread of 0.1 is about ±10 %. The draws come from a fixed seed: a spread
// gives the same figures at every run.

#include <cstdint>

#include "compute/expected.hpp"
#include "schedules/schedule.hpp"
#include "schedules/simulator.hpp"

namespace troupe::schedules {

struct SpreadBubble {
  double mean = 0.0;  // the bubble's mean over the trials
  double low = 0.0;   // its 5th percentile
  double high = 0.0;  // its 95th percentile
};

// An Error for a spread that is negative or not finite, fewer than one trial, costs that
// simulate() refuses, or costs with op_costs already (they are what a trial draws).
Expected<SpreadBubble> simulate_with_spread(const Schedule& schedule, const CostModel& costs, double spread, int trials,
                                            std::uint64_t seed = 1);

}  // namespace troupe::schedules
