#include "compute/train/dynamic_shares.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "compute/expected.hpp"
#include "compute/train/balance.hpp"

namespace troupe::compute {

double predicted_step_seconds(std::span<const int> shares, std::span<const double> seconds_per_micro_batch) {
  double slowest = 0;
  for (std::size_t r = 0; r < shares.size(); ++r) slowest = std::max(slowest, shares[r] * seconds_per_micro_batch[r]);
  return slowest;
}

std::vector<double> times_at_mean(std::span<const double> seconds_per_micro_batch) {
  double sum = 0;
  int measured = 0;
  for (double s : seconds_per_micro_batch)
    if (s > 0 && std::isfinite(s)) {
      sum += s;
      ++measured;
    }
  if (measured == 0) return {};
  std::vector<double> times(seconds_per_micro_batch.begin(), seconds_per_micro_batch.end());
  for (double& s : times)
    if (!(s > 0) || !std::isfinite(s)) s = sum / measured;
  return times;
}

DynamicShares::DynamicShares(std::vector<int> start, int window, double threshold)
    : start_(std::move(start)),
      shares_(start_),
      window_(window),
      threshold_(threshold),
      units_(std::accumulate(start_.begin(), start_.end(), 0)) {
  TROUPE_CHECK(window_ >= 1 && !start_.empty() && *std::min_element(start_.begin(), start_.end()) >= 1,
               "dynamic shares need a window and a share of at least one unit each");
}

bool DynamicShares::observe(std::span<const double> seconds_per_micro_batch) {
  TROUPE_CHECK(seconds_per_micro_batch.size() == shares_.size(), "a measurement for another number of replicas");
  measured_.emplace_back(seconds_per_micro_batch.begin(), seconds_per_micro_batch.end());
  if (static_cast<int>(measured_.size()) > window_) measured_.pop_front();
  // Step 1: the mean over the steps kept.
  times_.assign(shares_.size(), 0.0);
  for (const std::vector<double>& step : measured_)
    for (std::size_t r = 0; r < times_.size(); ++r) times_[r] += step[r] / static_cast<double>(measured_.size());
  if (static_cast<int>(measured_.size()) < window_) return false;
  std::vector<double> speeds(times_.size());
  for (std::size_t r = 0; r < times_.size(); ++r) {
    if (!(times_[r] > 0) || !std::isfinite(times_[r])) return false;  // nothing measured: no decision
    speeds[r] = 1.0 / times_[r];
  }
  // Step 2: the candidate; step 3: the hysteresis.
  Expected<std::vector<int>> candidate = proportional_shares(units_, speeds);
  TROUPE_CHECK(candidate.ok(), "dynamic shares of valid speeds");
  if (*candidate == shares_) return false;
  if (predicted_step_seconds(*candidate, times_) >= (1.0 - threshold_) * predicted_step_seconds(shares_, times_))
    return false;
  // Step 4: a change; the next decision reads steps taken with the new shares.
  shares_ = std::move(*candidate);
  measured_.clear();
  return true;
}

bool DynamicShares::resume(std::span<const double> seconds_per_micro_batch) {
  TROUPE_CHECK(seconds_per_micro_batch.size() == shares_.size(), "a measurement for another number of replicas");
  measured_.clear();
  times_ = times_at_mean(seconds_per_micro_batch);
  if (times_.empty()) {
    shares_ = start_;
    return false;
  }
  std::vector<double> speeds(times_.size());
  for (std::size_t r = 0; r < times_.size(); ++r) speeds[r] = 1.0 / times_[r];
  Expected<std::vector<int>> resumed = proportional_shares(units_, speeds);
  TROUPE_CHECK(resumed.ok(), "dynamic shares of valid speeds");
  shares_ = std::move(*resumed);
  return true;
}

void DynamicShares::regroup(std::vector<int> start) {
  TROUPE_CHECK(!start.empty() && *std::min_element(start.begin(), start.end()) >= 1,
               "dynamic shares need a share of at least one unit each");
  start_ = std::move(start);
  shares_ = start_;
  units_ = std::accumulate(start_.begin(), start_.end(), 0);
  measured_.clear();
}

}  // namespace troupe::compute
