// The job's environment variables (actors/process_environment.hpp): each accessor gives the value when it
// is valid, the table's default when the variable is unset, and one error line naming the variable
// and its value when it is invalid; docs/environment.md lists every variable of the table.

#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <utility>

#include "actors/process_environment.hpp"
#include "comm/knobs.hpp"
#include "support/scoped_env.hpp"
#include "support/source_file.hpp"

using namespace troupe::actors;
using troupe::test::ScopedEnv;

TEST_CASE("an integer variable is its value when valid and its default when unset", "[environment]") {
  {
    ScopedEnv rank("RANK", "3"), world("WORLD_SIZE", "8"), slots("TROUPE_SLOTS", "2");
    CHECK(env::read_rank().value() == 3);
    CHECK(env::read_world_size().value() == 8);
    CHECK(env::read_slots().value() == 2);
  }
  ScopedEnv rank("RANK", nullptr), world("WORLD_SIZE", nullptr), slots("TROUPE_SLOTS", nullptr),
      local_rank("LOCAL_RANK", nullptr), local_world("LOCAL_WORLD_SIZE", nullptr), index("TROUPE_NODE_INDEX", nullptr);
  CHECK(env::read_rank().value() == 0);
  CHECK(env::read_world_size().value() == 1);
  CHECK(env::read_slots().value() == 1);
  CHECK(env::read_local_rank().value() == 0);
  CHECK(env::read_local_world_size().value() == 1);
  CHECK(env::read_node_index().value() == -1);
}

TEST_CASE("an invalid integer variable is one line naming it and its value", "[environment]") {
  auto error_of = [](const char* name, const char* value, auto read) {
    ScopedEnv set(name, value);
    auto result = read();
    REQUIRE_FALSE(result.ok());
    return result.error().message;
  };
  CHECK(error_of("RANK", "abc", env::read_rank) == "environment variable RANK: expected an integer >= 0, got 'abc'");
  CHECK(error_of("RANK", "-1", env::read_rank) == "environment variable RANK: expected an integer >= 0, got '-1'");
  CHECK(error_of("RANK", "", env::read_rank) == "environment variable RANK: expected an integer >= 0, got ''");
  CHECK(error_of("RANK", "2x", env::read_rank) == "environment variable RANK: expected an integer >= 0, got '2x'");
  CHECK(error_of("RANK", " 2", env::read_rank) == "environment variable RANK: expected an integer >= 0, got ' 2'");
  CHECK(error_of("RANK", "4294967296", env::read_rank) ==
        "environment variable RANK: expected an integer <= 2147483647, got '4294967296'");
  CHECK(error_of("WORLD_SIZE", "0", env::read_world_size) ==
        "environment variable WORLD_SIZE: expected an integer >= 1, got '0'");
  CHECK(error_of("TROUPE_SLOTS", "x", env::read_slots) ==
        "environment variable TROUPE_SLOTS: expected an integer >= 1, got 'x'");
  CHECK(error_of("LOCAL_RANK", "-3", env::read_local_rank) ==
        "environment variable LOCAL_RANK: expected an integer >= 0, got '-3'");
  CHECK(error_of("LOCAL_WORLD_SIZE", "0", env::read_local_world_size) ==
        "environment variable LOCAL_WORLD_SIZE: expected an integer >= 1, got '0'");
  CHECK(error_of("TROUPE_NODE_INDEX", "-1", env::read_node_index) ==
        "environment variable TROUPE_NODE_INDEX: expected an integer >= 0, got '-1'");
  CHECK(error_of("TROUPE_DRILL_NODE_GONE", "one", env::read_drill_node_gone) ==
        "environment variable TROUPE_DRILL_NODE_GONE: expected an integer >= 0, got 'one'");
}

TEST_CASE("TROUPE_PEAK_FLOPS is a positive integer of FLOP/s, 0 when unset", "[environment]") {
  {
    ScopedEnv peak("TROUPE_PEAK_FLOPS", "91234567890");
    auto read = env::read_peak_flops();
    REQUIRE(read.ok());
    CHECK(*read == 91234567890);
  }
  {
    ScopedEnv peak("TROUPE_PEAK_FLOPS", "0");
    REQUIRE_FALSE(env::read_peak_flops().ok());
    CHECK(env::read_peak_flops().error().message ==
          "environment variable TROUPE_PEAK_FLOPS: expected an integer >= 1, got '0'");
  }
  ScopedEnv unset("TROUPE_PEAK_FLOPS", nullptr);
  auto read = env::read_peak_flops();
  REQUIRE(read.ok());
  CHECK(*read == 0);
}

TEST_CASE("the text variables are their value, or nothing when unset", "[environment]") {
  {
    ScopedEnv join("TROUPE_JOIN", "10.0.0.5:29500"), token("TROUPE_TOKEN", "");
    CHECK(env::read_join() == "10.0.0.5:29500");
    CHECK(env::read_token() == "");
  }
  ScopedEnv join("TROUPE_JOIN", nullptr), token("TROUPE_TOKEN", nullptr);
  CHECK_FALSE(env::read_join());
  CHECK_FALSE(env::read_token());
}

TEST_CASE("TROUPE_DRILL_THROW_AT is RANK:STEP or nothing", "[environment]") {
  {
    ScopedEnv unset("TROUPE_DRILL_THROW_AT", nullptr);
    REQUIRE(env::read_drill_throw_at());
    CHECK_FALSE(env::read_drill_throw_at().value());
  }
  {
    ScopedEnv set("TROUPE_DRILL_THROW_AT", "1:3");
    auto at = env::read_drill_throw_at();
    REQUIRE(at);
    REQUIRE(*at);
    CHECK((*at)->rank == 1);
    CHECK((*at)->step == 3);
  }
  for (const char* bad : {"1", "1:", ":3", "1:3x", "x:3", "-1:3", "1:-3", ""}) {
    INFO(bad);
    ScopedEnv set("TROUPE_DRILL_THROW_AT", bad);
    auto at = env::read_drill_throw_at();
    REQUIRE_FALSE(at);
    CHECK(at.error().message ==
          "environment variable TROUPE_DRILL_THROW_AT: expected RANK:STEP, two integers >= 0, got '" +
              std::string(bad) + "'");
  }
}

TEST_CASE("TROUPE_DRILL_KILL_AT is RANK:STEP, RANK:STEP:sync or nothing", "[environment]") {
  {
    ScopedEnv unset("TROUPE_DRILL_KILL_AT", nullptr);
    REQUIRE(env::read_drill_kill_at());
    CHECK_FALSE(env::read_drill_kill_at().value());
  }
  for (const auto& [text, in_sync] : {std::pair{"1:3", false}, std::pair{"1:3:sync", true}}) {
    ScopedEnv set("TROUPE_DRILL_KILL_AT", text);
    auto at = env::read_drill_kill_at();
    REQUIRE(at);
    REQUIRE(*at);
    CHECK((*at)->rank == 1);
    CHECK((*at)->step == 3);
    CHECK((*at)->in_sync == in_sync);
  }
  for (const char* bad : {"1", "1:", "1:sync", "1:3:", "1:3:async", "x:3", "-1:3", ""}) {
    INFO(bad);
    ScopedEnv set("TROUPE_DRILL_KILL_AT", bad);
    auto at = env::read_drill_kill_at();
    REQUIRE_FALSE(at);
    CHECK(at.error().message ==
          "environment variable TROUPE_DRILL_KILL_AT: expected RANK:STEP or RANK:STEP:sync, two integers >= 0, got '" +
              std::string(bad) + "'");
  }
}

TEST_CASE("TROUPE_RESTARTS is read through the table, all zero when unset", "[environment]") {
  {
    ScopedEnv unset("TROUPE_RESTARTS", nullptr);
    REQUIRE(env::read_restarts());
    CHECK(env::read_restarts()->restarts == 0);
  }
  {
    ScopedEnv set("TROUPE_RESTARTS", "restarts=2 failure.hang=1");
    auto counts = env::read_restarts();
    REQUIRE(counts);
    CHECK(counts->restarts == 2);
    CHECK(counts->failures.at(FailureKind::hang) == 1);
  }
  ScopedEnv bad("TROUPE_RESTARTS", "restarts=x");
  CHECK(env::read_restarts().error().message == "TROUPE_RESTARTS: 'restarts=x' is not NAME=COUNT");
}

TEST_CASE("check_inherited names the first invalid comm knob or drill variable", "[environment]") {
  ScopedEnv window("TROUPE_COMM_WINDOW", nullptr), throw_at("TROUPE_DRILL_THROW_AT", nullptr),
      gone("TROUPE_DRILL_NODE_GONE", nullptr);
  CHECK(env::check_inherited().ok());
  {
    ScopedEnv bad("TROUPE_COMM_WINDOW", "four");
    REQUIRE_FALSE(env::check_inherited().ok());
    CHECK(env::check_inherited().error().message ==
          "environment variable TROUPE_COMM_WINDOW: expected an integer >= 0, got 'four'");
  }
  ScopedEnv bad("TROUPE_DRILL_NODE_GONE", "-2");
  REQUIRE_FALSE(env::check_inherited().ok());
  CHECK(env::check_inherited().error().message ==
        "environment variable TROUPE_DRILL_NODE_GONE: expected an integer >= 0, got '-2'");
}

TEST_CASE("every variable is declared once and documented in docs/environment.md", "[environment]") {
  const std::string doc = troupe::test::source_text("docs/environment.md");
  std::set<std::string> names;
  for (const env::Variable& variable : env::variables) {
    INFO(variable.name);
    CHECK(names.insert(variable.name).second);
    CHECK_THAT(doc, Catch::Contains("| `" + std::string(variable.name) + "` |"));
  }
  // An integer variable's default in words is the number its accessor returns when unset.
  for (const env::Variable& variable :
       {env::rank, env::world_size, env::local_rank, env::local_world_size, env::slots, env::attempt}) {
    INFO(variable.name);
    CHECK(std::string(variable.unset) == std::to_string(variable.fallback));
    CHECK_THAT(doc, Catch::Contains("| `" + std::string(variable.name) + "` | troupe launch | " +
                                          std::to_string(variable.fallback) + " |"));
  }
  for (const troupe::comm::Knob& knob : troupe::comm::knobs) {
    INFO(knob.name);
    CHECK(names.insert(knob.name).second);
    CHECK_THAT(doc, Catch::Contains("| `" + std::string(knob.name) + "` |"));
  }
}
