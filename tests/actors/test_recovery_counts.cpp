// TROUPE_RESTARTS, the counts of failures and recoveries the job hands each node process it
// (re)starts (actors/recovery_counts.hpp): its text round-trips and bad text is refused by name.

#include <catch2/catch.hpp>

#include "actors/recovery_counts.hpp"

using troupe::actors::FailureKind;
using troupe::actors::RecoveryCounts;
using troupe::actors::RecoverySource;

TEST_CASE("recovery counts round-trip through their TROUPE_RESTARTS text", "[recovery]") {
  RecoveryCounts counts;
  counts.restarts = 2;
  counts.failures[FailureKind::worker_exception] = 1;
  counts.failures[FailureKind::node_lost] = 1;
  counts.failures[FailureKind::hang] = 1;
  counts.failures[FailureKind::start_failed] = 1;
  counts.recoveries[RecoverySource::shrink] = 1;
  counts.recoveries[RecoverySource::replica] = 1;
  counts.recoveries[RecoverySource::checkpoint] = 1;
  counts.recoveries[RecoverySource::in_place] = 3;
  const std::string text = counts.to_text();
  // By name, whatever the enums' order.
  CHECK(text ==
        "restarts=2 failure.hang=1 failure.node_lost=1 failure.start_failed=1 failure.worker_exception=1 "
        "recovery.checkpoint=1 recovery.in_place=3 recovery.replica=1 recovery.shrink=1");
  auto parsed = RecoveryCounts::parse(text);
  REQUIRE(parsed);
  CHECK(parsed->restarts == 2);
  CHECK(parsed->failures == counts.failures);
  CHECK(parsed->recoveries == counts.recoveries);
  CHECK(RecoveryCounts::parse("")->restarts == 0);
}

TEST_CASE("recovery counts refuse text that is not NAME=COUNT", "[recovery]") {
  CHECK(RecoveryCounts::parse("restarts=x").error().message == "TROUPE_RESTARTS: 'restarts=x' is not NAME=COUNT");
  CHECK(RecoveryCounts::parse("restarts").error().message == "TROUPE_RESTARTS: 'restarts' is not NAME=COUNT");
  CHECK(RecoveryCounts::parse("bogus=1").error().message == "TROUPE_RESTARTS: unknown count 'bogus'");
  CHECK(RecoveryCounts::parse("failure.meteor=1").error().message == "TROUPE_RESTARTS: unknown failure kind 'meteor'");
  CHECK(RecoveryCounts::parse("recovery.luck=1").error().message == "TROUPE_RESTARTS: unknown recovery source 'luck'");
}
