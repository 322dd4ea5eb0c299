// troupe launch / troupe train --workers N, as far as its own options go: a fault.rescue_timeout
// the rescue's waits cannot be derived from is refused before any node starts, with one line.
// The restart loop's decisions are pinned by tests/actors/supervision/test_restart_policy.cpp,
// and end to end by the drills (test_drill.cpp).

#include <catch2/catch.hpp>

#include "apps/run_troupe.hpp"

using namespace troupe::test;

TEST_CASE("a fault.rescue_timeout outside 1 to 3600 seconds is refused with one line", "[cli]") {
  TempDir dir;
  check_rejected_in(dir, {"train", "--workers", "2", "--fault.rescue_timeout", "0"},
                    "fault.rescue_timeout must be between 1 and 3600 seconds, got 0.0");
  const std::string hosts = dir.write("hosts", "localhost slots=2\n");
  check_rejected_in(dir, {"launch", "--hostfile", hosts, "--fault.rescue_timeout=-5"},
                    "fault.rescue_timeout must be between 1 and 3600 seconds, got -5.0");
}
