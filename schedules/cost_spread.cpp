#include "schedules/cost_spread.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

namespace troupe::schedules {

Expected<SpreadBubble> simulate_with_spread(const Schedule& schedule, const CostModel& costs, double spread, int trials,
                                            std::uint64_t seed) {
  if (!(spread >= 0 && std::isfinite(spread)))
    return Error{"simulate_with_spread: the spread must be zero or positive, got " + std::to_string(spread)};
  if (trials < 1) return Error{"simulate_with_spread: at least one trial, got " + std::to_string(trials)};
  if (!costs.op_costs.empty()) return Error{"simulate_with_spread: costs with op_costs already"};
  std::mt19937_64 random(seed);
  std::normal_distribution<double> log_factor(0.0, spread);
  std::vector<double> bubbles;
  for (int t = 0; t < trials; ++t) {
    CostModel drawn = costs;
    for (int s = 0; s < schedule.stages; ++s) {
      const std::vector<Instruction>& stream = schedule.streams[static_cast<std::size_t>(s)];
      std::vector<double>& row = drawn.op_costs.emplace_back(stream.size(), 0.0);
      for (std::size_t i = 0; i < stream.size(); ++i)
        if (is_compute(stream[i].op)) row[i] = stream_cost(schedule, costs, s, i) * std::exp(log_factor(random));
    }
    auto simulation = simulate(schedule, drawn);
    if (!simulation) return simulation.error();
    bubbles.push_back(simulation->bubble);
  }
  std::sort(bubbles.begin(), bubbles.end());
  const auto at = [&](double q) {
    return bubbles[static_cast<std::size_t>(q * static_cast<double>(trials - 1) + 0.5)];
  };
  return SpreadBubble{std::accumulate(bubbles.begin(), bubbles.end(), 0.0) / trials, at(0.05), at(0.95)};
}

}  // namespace troupe::schedules
