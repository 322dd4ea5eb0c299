#include <catch2/catch.hpp>

#include "monitor/straggler_watch.hpp"

using troupe::monitor::StragglerWatch;

TEST_CASE("the straggler is the rank that does not wait while the others wait for it", "[straggler]") {
  StragglerWatch watch(4);
  for (int i = 0; i < 3; ++i) {
    watch.sample(0, true);
    watch.sample(1, false);
    watch.sample(2, i != 0);
  }
  CHECK(!watch.find());  // three samples of a window of four: too early to judge
  watch.sample(0, true);
  watch.sample(1, false);
  watch.sample(2, true);
  const auto straggler = watch.find();
  REQUIRE(straggler);
  CHECK(straggler->rank == 1);
  CHECK(straggler->waiting_share == 0.0);
  CHECK(straggler->others_waiting_share == 0.75);
}

TEST_CASE("balanced ranks, a lone rank, or others that seldom wait name no straggler", "[straggler]") {
  StragglerWatch balanced(4), lone(4), busy(4);
  for (int i = 0; i < 4; ++i) {
    balanced.sample(0, i % 2 == 0);
    balanced.sample(1, i % 2 == 1);
    lone.sample(0, false);
    busy.sample(0, false);
    busy.sample(1, i == 0);  // waits in a quarter: not "mostly waiting"
  }
  CHECK(!balanced.find());
  CHECK(!lone.find());
  CHECK(!busy.find());
}

TEST_CASE("the window forgets: a straggler that caught up is no longer named", "[straggler]") {
  StragglerWatch watch(2);
  for (int i = 0; i < 2; ++i) {
    watch.sample(0, true);
    watch.sample(1, false);
  }
  REQUIRE(watch.find());
  for (int i = 0; i < 2; ++i) {
    watch.sample(0, false);
    watch.sample(1, false);
  }
  CHECK(!watch.find());
}
