// TROUPE_RESTARTS, the counts of failures and recoveries the job hands each node process it
// (re)starts (actors/supervision/recovery_counts.hpp): its text round-trips and bad text is refused by name.

#include <catch2/catch.hpp>

#include "actors/supervision/recovery_counts.hpp"

using troupe::actors::RecoveryCounts;

TEST_CASE("recovery counts round-trip through their TROUPE_RESTARTS text", "[recovery]") {
  RecoveryCounts counts;
  counts.restarts = 2;
  counts.failures["node_lost"] = 1;
  counts.failures["hang"] = 1;
  counts.recoveries["replica"] = 1;
  counts.recoveries["shrink"] = 1;
  const std::string text = counts.to_text();
  CHECK(text == "restarts=2 failure.hang=1 failure.node_lost=1 recovery.replica=1 recovery.shrink=1");
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
}
