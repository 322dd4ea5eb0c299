// Reading a variable of the process environment as a checked integer (compute/environment.hpp):
// the value when it is a whole number within its bounds, the caller's default when unset, else
// one error line naming the variable, the bound it missed and the value.

#include <catch2/catch.hpp>

#include "compute/environment.hpp"
#include "support/scoped_env.hpp"

using troupe::environment_integer;
using troupe::parse_environment_integer;
using troupe::test::ScopedEnv;

TEST_CASE("an integer variable within its bounds is its value", "[environment]") {
  CHECK(parse_environment_integer("N", "0", 0).value() == 0);
  CHECK(parse_environment_integer("N", "-5", -10, 10).value() == -5);
  CHECK(parse_environment_integer("N", "9223372036854775807", 0).value() == 9223372036854775807);
}

TEST_CASE("an integer variable outside its bounds or not a whole number is an error line", "[environment]") {
  CHECK(parse_environment_integer("N", "abc", 0).error().message ==
        "environment variable N: expected an integer >= 0, got 'abc'");
  CHECK(parse_environment_integer("N", "0", 1).error().message ==
        "environment variable N: expected an integer >= 1, got '0'");
  CHECK(parse_environment_integer("N", "11", 0, 10).error().message ==
        "environment variable N: expected an integer <= 10, got '11'");
  CHECK(parse_environment_integer("N", "99999999999999999999", 0).error().message ==
        "environment variable N: expected an integer <= 9223372036854775807, got '99999999999999999999'");
  CHECK(parse_environment_integer("N", "+1", 0).error().message ==
        "environment variable N: expected an integer >= 0, got '+1'");
  CHECK(parse_environment_integer("N", "1 ", 0).error().message ==
        "environment variable N: expected an integer >= 0, got '1 '");
  CHECK(parse_environment_integer("N", "x", std::numeric_limits<std::int64_t>::min()).error().message ==
        "environment variable N: expected an integer, got 'x'");
}

TEST_CASE("an unset integer variable is the caller's default, an empty one an error", "[environment]") {
  {
    ScopedEnv unset("TROUPE_TEST_VARIABLE", nullptr);
    CHECK(environment_integer("TROUPE_TEST_VARIABLE", 7, 0).value() == 7);
  }
  ScopedEnv empty("TROUPE_TEST_VARIABLE", "");
  CHECK(environment_integer("TROUPE_TEST_VARIABLE", 7, 0).error().message ==
        "environment variable TROUPE_TEST_VARIABLE: expected an integer >= 0, got ''");
}
