// train.balance dynamic's decision (compute/train/dynamic_shares.hpp): shares follow a replica's
// measured speed within the window each way, noise below the threshold changes nothing, and the
// shares do not oscillate.

#include <catch2/catch.hpp>

#include <vector>

#include "compute/train/dynamic_shares.hpp"

using namespace troupe::compute;

namespace {

// A deterministic noise in [-amplitude, amplitude] (a linear congruential sequence).
struct Noise {
  unsigned state = 12345;
  double operator()(double amplitude) {
    state = state * 1103515245u + 12345u;
    return amplitude * (2.0 * ((state >> 8) % 10000) / 9999.0 - 1.0);
  }
};

}  // namespace

TEST_CASE("predicted step time is the slowest replica's shares times its time per micro-batch", "[balance]") {
  CHECK(predicted_step_seconds(std::vector<int>{4, 4}, std::vector<double>{0.2, 0.4}) == Approx(1.6));
  CHECK(predicted_step_seconds(std::vector<int>{5, 3}, std::vector<double>{0.2, 0.4}) == Approx(1.2));
  CHECK(predicted_step_seconds(std::vector<int>{6, 2}, std::vector<double>{0.2, 0.4}) == Approx(1.2));
}

TEST_CASE("dynamic shares follow a slowdown that starts and ends, within the window each way", "[balance]") {
  const int window = 3;
  DynamicShares balance({4, 4}, window);
  std::vector<long> changes;
  std::vector<std::vector<int>> taken;  // the shares after each change
  for (long step = 0; step < 60; ++step) {
    // Replica 1 runs at half speed from step 20 to step 39.
    const double slow = step >= 20 && step < 40 ? 0.4 : 0.2;
    if (balance.observe(std::vector<double>{0.2, slow})) {
      changes.push_back(step);
      taken.push_back(balance.shares());
    }
  }
  REQUIRE(changes.size() == 2);
  // The window ending at step 21 still holds a fast step; the first all slow one decides.
  CHECK(changes[0] >= 20);
  CHECK(changes[0] <= 20 + window);
  CHECK(taken[0] == std::vector<int>{5, 3});
  CHECK(changes[1] >= 40);
  CHECK(changes[1] <= 40 + window);
  CHECK(taken[1] == std::vector<int>{4, 4});
  CHECK(balance.seconds_per_micro_batch()[1] == Approx(0.2));
}

TEST_CASE("dynamic shares: measurement noise below the threshold changes nothing", "[balance]") {
  DynamicShares balance({4, 4}, 3);
  Noise noise;
  for (int step = 0; step < 200; ++step) {
    const std::vector<double> times{0.2 * (1 + noise(0.04)), 0.2 * (1 + noise(0.04))};
    CHECK_FALSE(balance.observe(times));
  }
  CHECK(balance.shares() == std::vector<int>{4, 4});
}

TEST_CASE("dynamic shares settle once under a steady noisy slowdown and do not oscillate", "[balance]") {
  // Three replicas, the last at a third of the others' speed, every measurement 3 % noisy.
  DynamicShares balance({4, 4, 4}, 3);
  Noise noise;
  int changes = 0;
  for (int step = 0; step < 300; ++step) {
    const std::vector<double> times{0.1 * (1 + noise(0.03)), 0.1 * (1 + noise(0.03)), 0.3 * (1 + noise(0.03))};
    changes += balance.observe(times) ? 1 : 0;
  }
  CHECK(changes == 1);
  CHECK(balance.shares() == std::vector<int>{5, 5, 2});
}

TEST_CASE("dynamic shares change at most once a window, and start again when nothing was measured", "[balance]") {
  DynamicShares balance({2, 2}, 4);
  // The window is not full: no decision yet, however uneven.
  for (int step = 0; step < 3; ++step) CHECK_FALSE(balance.observe(std::vector<double>{0.1, 1.0}));
  CHECK(balance.observe(std::vector<double>{0.1, 1.0}));
  CHECK(balance.shares() == std::vector<int>{3, 1});
  // The speeds swap at once: the next change waits for a whole window of new measurements.
  for (int step = 0; step < 3; ++step) CHECK_FALSE(balance.observe(std::vector<double>{1.0, 0.1}));
  CHECK(balance.observe(std::vector<double>{1.0, 0.1}));
  CHECK(balance.shares() == std::vector<int>{1, 3});
  // A recovery in which every replica is new: nothing measured, the first shares again.
  CHECK_FALSE(balance.resume(std::vector<double>{0.0, 0.0}));
  CHECK(balance.shares() == std::vector<int>{2, 2});
  CHECK(balance.seconds_per_micro_batch().empty());
  // A replica that measured nothing (zero time) leads to no decision.
  for (int step = 0; step < 8; ++step) CHECK_FALSE(balance.observe(std::vector<double>{0.0, 1.0}));
}

TEST_CASE("a replacement's time is the mean of the measured replicas', and none measured is none", "[balance]") {
  CHECK_THAT(times_at_mean(std::vector<double>{0.2, 0.0, 0.4}),
             Catch::Matchers::Approx(std::vector<double>{0.2, 0.3, 0.4}));
  CHECK(times_at_mean(std::vector<double>{0.0, 0.5}) == std::vector<double>{0.5, 0.5});
  CHECK(times_at_mean(std::vector<double>{0.1, 0.2}) == std::vector<double>{0.1, 0.2});
  CHECK(times_at_mean(std::vector<double>{0.0, 0.0}).empty());
}

TEST_CASE("after a recovery the survivors keep their measured speeds and a replacement starts at the mean share",
          "[balance]") {
  DynamicShares balance({4, 4, 4}, 2);
  // Replica 2 runs at a quarter of the others' speed: the shares move to it.
  for (int step = 0; step < 2; ++step) balance.observe(std::vector<double>{0.1, 0.1, 0.4});
  REQUIRE(balance.shares() == std::vector<int>{5, 5, 2});
  // Replica 2 is replaced: it is taken at the survivors' mean (0.1 s), all three even, at once,
  // without the threshold or a window.
  CHECK(balance.resume(std::vector<double>{0.1, 0.1, 0.0}));
  CHECK(balance.shares() == std::vector<int>{4, 4, 4});
  CHECK_THAT(balance.seconds_per_micro_batch(), Catch::Matchers::Approx(std::vector<double>{0.1, 0.1, 0.1}));
  // Replica 0 replaced where the survivors run at 0.1 s and 0.3 s: it starts at their mean 0.2 s,
  // the share a replica of that speed takes (speeds 5 : 10 : 3.3; 1 each and 9 by largest remainder).
  CHECK(balance.resume(std::vector<double>{0.0, 0.1, 0.3}));
  CHECK(balance.shares() == std::vector<int>{3, 6, 3});
  // The window starts again: one step decides nothing, the next may.
  CHECK_FALSE(balance.observe(std::vector<double>{0.2, 0.1, 0.3}));
}

TEST_CASE(
    "a group grown in place starts from its new first shares and puts a grown replica at the mean of the "
    "measured ones",
    "[balance]") {
  DynamicShares balance({8}, 2);
  balance.observe(std::vector<double>{0.1});
  // The job grows from one replica to two, the second declared at a third of the first's speed.
  balance.regroup({6, 2});
  CHECK(balance.shares() == std::vector<int>{6, 2});
  // The survivor measured 0.1 s; the grown replica, measured by nobody, is taken at that mean.
  CHECK(balance.resume(std::vector<double>{0.1, 0.0}));
  CHECK(balance.shares() == std::vector<int>{4, 4});
  // Nothing measured: the new first shares, not the old ones.
  balance.regroup({6, 2});
  CHECK_FALSE(balance.resume(std::vector<double>{0.0, 0.0}));
  CHECK(balance.shares() == std::vector<int>{6, 2});
}
