// The TROUPE_COMM_* knobs (comm/knobs.hpp): a knob is its value when it is a whole number >= 0,
// its default when unset, and otherwise one error line naming it and its value, which stops
// Engine::create before anything starts; never a silent fall-back to the default.

#include "rank_support.hpp"

#include "comm/engine.hpp"
#include "comm/knobs.hpp"

using namespace troupe::comm;
using troupe::test::ScopedEnv;

TEST_CASE("a knob is its value when valid and its default when unset", "[knobs]") {
  {
    ScopedEnv set("TROUPE_COMM_WINDOW", "16");
    CHECK(read_knob(knob_window).value() == 16);
    CHECK(knob_value(knob_window) == 16);
  }
  {
    ScopedEnv set("TROUPE_COMM_MAPPED_BLOCKS", "0");
    CHECK(read_knob(knob_mapped_blocks).value() == 0);
  }
  for (const Knob& knob : knobs) {
    INFO(knob.name);
    ScopedEnv unset(knob.name, nullptr);
    CHECK(read_knob(knob).value() == knob.fallback);
  }
  CHECK(check_knobs().ok());
}

TEST_CASE("an invalid knob is one line naming it and its value", "[knobs]") {
  for (const char* bad : {"x", "-1", "", "4k", "1.5"}) {
    INFO(bad);
    ScopedEnv set("TROUPE_COMM_CHUNK_BYTES", bad);
    auto value = read_knob(knob_chunk_bytes);
    REQUIRE_FALSE(value);
    const std::string line =
        "environment variable TROUPE_COMM_CHUNK_BYTES: expected an integer >= 0, got '" + std::string(bad) + "'";
    CHECK(value.error().message == line);
    REQUIRE_FALSE(check_knobs().ok());
    CHECK(check_knobs().error().message == line);
  }
}

TEST_CASE("engine creation stops at an invalid knob, naming it", "[knobs][engine]") {
  ScopedEnv set("TROUPE_COMM_SPIN_US", "fast");
  auto engine = Engine::create(0, 1);
  REQUIRE_FALSE(engine.ok());
  CHECK(engine.error().message == "environment variable TROUPE_COMM_SPIN_US: expected an integer >= 0, got 'fast'");
}
