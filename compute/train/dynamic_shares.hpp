#pragma once
// train.balance dynamic: the data-parallel shares (balance.hpp) follow the replicas' measured speeds.
// Every replica measures its compute time per micro-batch each step (its forward and backward, not
// the wait in the gradient sum); the group's sum carries every replica's measurement, so every rank
// sees the same numbers and takes the same decision at the same step boundary:
//
//   1. keep the last `window` steps' measurements; their mean is each replica's time per micro-batch;
//   2. once `window` steps are measured since the last change, the candidate shares are the largest
//      remainder ones (proportional_shares) of the speeds 1 / time;
//   3. take them only when they differ from the current ones and the predicted step time — the
//      slowest replica's shares[r] × time[r] — improves by more than `threshold` (5 %);
//   4. after a change the measurements start again, so shares change at most every `window` steps.
//
// Step 3 is the hysteresis: two shares cannot each improve on the other by 5 % from the same
// times, so noise below the threshold changes nothing and the shares do not oscillate.
//
// After an in-place recovery the survivors keep what they measured and a replacement starts at the
// mean: its time per micro-batch is taken as the mean of the measured replicas' (times_at_mean),
// and the shares are those times' largest-remainder shares, taken at once (no threshold). With
// nothing measured (a recovery before the first window, or every replica new) the shares are the
// first ones again.

#include <deque>
#include <span>
#include <vector>

namespace troupe::compute {

// How much the predicted step time must improve (as a fraction) before the shares change.
inline constexpr double balance_threshold = 0.05;

// The step time `shares` predict from each replica's seconds per micro-batch: the slowest replica's.
double predicted_step_seconds(std::span<const int> shares, std::span<const double> seconds_per_micro_batch);

// Each replica's seconds per micro-batch with the unmeasured ones (0) at the mean of the measured
// ones; empty when none is measured.
std::vector<double> times_at_mean(std::span<const double> seconds_per_micro_batch);

class DynamicShares {
 public:
  // From `start` (summing to the step's micro-batches, each at least 1), deciding over `window` steps.
  DynamicShares(std::vector<int> start, int window, double threshold = balance_threshold);

  // One step's seconds per micro-batch of every replica, in replica order. True when the shares
  // change: the next step takes shares().
  bool observe(std::span<const double> seconds_per_micro_batch);
  const std::vector<int>& shares() const { return shares_; }
  // Each replica's mean seconds per micro-batch over the steps measured (those of the last decision
  // just after a change); empty before the first step.
  const std::vector<double>& seconds_per_micro_batch() const { return times_; }
  // After a recovery, from every replica's seconds per micro-batch as the survivors measured them
  // (0 for a replacement): the shares of times_at_mean's times, or the first shares when nothing
  // was measured; the window starts again. True when the shares come from measured times.
  bool resume(std::span<const double> seconds_per_micro_batch);
  // The data-parallel group grew in place: `start` (one share per replica of the grown group) are
  // the first shares from now on and the current ones; what the replicas measured is kept for the
  // resume that follows (a grown replica, measured by nobody, then starts at the mean).
  void regroup(std::vector<int> start);

 private:
  std::vector<int> start_, shares_;
  int window_;
  double threshold_;
  int units_;
  std::deque<std::vector<double>> measured_;  // the last `window` steps', oldest first
  std::vector<double> times_;
};

}  // namespace troupe::compute
