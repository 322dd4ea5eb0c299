#include "monitor/straggler_watch.hpp"

#include <algorithm>

namespace troupe::monitor {

void StragglerWatch::sample(int rank, bool waiting) {
  std::deque<bool>& samples = samples_[rank];
  samples.push_back(waiting);
  if (static_cast<int>(samples.size()) > window_) samples.pop_front();
}

std::optional<StragglerWatch::Straggler> StragglerWatch::find() const {
  if (samples_.size() < 2) return std::nullopt;
  std::map<int, double> share;
  for (const auto& [rank, samples] : samples_) {
    if (static_cast<int>(samples.size()) < window_) return std::nullopt;
    share[rank] = static_cast<double>(std::count(samples.begin(), samples.end(), true)) / window_;
  }
  const auto slowest = std::min_element(share.begin(), share.end(),
                                        [](const auto& a, const auto& b) { return a.second < b.second; });
  double others = 1.0;
  for (const auto& [rank, s] : share)
    if (rank != slowest->first) others = std::min(others, s);
  if (slowest->second > 0.25 || others < 0.5) return std::nullopt;
  return Straggler{slowest->first, slowest->second, others};
}

}  // namespace troupe::monitor
