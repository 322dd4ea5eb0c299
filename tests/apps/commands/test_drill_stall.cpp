// A drill's watch of a job that stalls: the event feed gives up its waits once the job has sent no
// event for the stall limit, and the drill then asks the job where its ranks and nodes stand, puts
// the answers in the verdict and kills the job, instead of waiting out its long limits. A paused
// job (the shell's `pause`) is the stall here: heartbeats go on, no step ends.

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdio>
#include <regex>
#include <string>

#include "apps/commands/drill/drill.hpp"
#include "apps/live_job.hpp"
#include "support/scoped_env.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
namespace drill = troupe::apps::drill;
using Catch::Contains;
using Catch::StartsWith;

TEST_CASE("a drill calls a job that sends no event for its stall limit stalled, reports where its ranks stand and "
          "kills it",
          "[drill]") {
  TempDir dir;
  const ScopedEnv runtime("XDG_RUNTIME_DIR", dir.path().c_str());  // where the job wrote its token
  LiveJob job(dir, 100000);
  auto feed = drill::EventFeed::open(job.control_port, std::chrono::seconds(30), [] { return true; }, dir.file("events"));
  REQUIRE(feed);
  const auto limit = std::chrono::seconds(3);
  (*feed)->set_stall_limit(limit);
  const drill::Match a_step = drill::body_is<troupe::actors::step_trained>();
  REQUIRE((*feed)->wait_for(a_step, std::chrono::seconds(30)));
  CHECK_FALSE((*feed)->stalled_for());

  auto paused = (*feed)->order("pause");
  REQUIRE(paused);
  INFO(paused.value());
  std::smatch m;
  const std::string answer = paused.value();
  REQUIRE(std::regex_search(answer, m, std::regex("paused after step ([0-9]+)")));
  const long paused_after = std::stol(m[1].str());
  const auto start = std::chrono::steady_clock::now();
  // A wait far longer than the limit gives up at the limit (the paused step's own event may come
  // first: it does not match).
  CHECK_FALSE((*feed)->wait_for(drill::body_is<troupe::actors::step_trained>(
                                    [paused_after](const auto& s) { return s.step > paused_after; }),
                                std::chrono::seconds(120)));
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(waited < 30);
  REQUIRE((*feed)->stalled_for());
  CHECK(*(*feed)->stalled_for() >= limit);

  drill::Run run{std::move(job.run), std::move(*feed)};
  drill::Verdict v;
  const std::optional<int> code = drill::await_end(run, v);
  for (const std::string& check : v.checks) std::printf("  %s\n", check.c_str());
  REQUIRE(code);
  CHECK(*code != 0);  // killed
  REQUIRE(v.checks.size() == 3);
  CHECK_THAT(v.checks[0], StartsWith("stalled: the job sent no event for ") && Contains("where it stood then:"));
  // Every rank's line says it is paused; every node's, its host and pid.
  CHECK_THAT(v.checks[1], StartsWith("workers:\n    ") && Contains("paused"));
  CHECK_THAT(v.checks[2], StartsWith("nodes:\n    ") && Contains("localhost"));
}
