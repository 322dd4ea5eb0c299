// A node process that a fault's signal hits reports it in the job's log through Troupe's own
// handler (monitor/fatal_signal_report.hpp), installed over the one UCX brings, and dies of it; the
// job finds the node lost and recovers in place.

#include <catch2/catch.hpp>

#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <regex>
#include <string>

#include "apps/line_match.hpp"
#include "apps/live_job.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using std::chrono::seconds;

TEST_CASE("a node process hit by SIGSEGV reports it with a backtrace, dies, and the job recovers it in place",
          "[recovery]") {
  TempDir dir;
  LiveJob job(dir, 100000);
  const auto joined = job.run->wait_for_line(matching("node 1 \\(vm, pid \\d+\\) joined"), seconds(5));
  REQUIRE(joined);
  std::smatch m;
  REQUIRE(std::regex_search(joined->text, m, std::regex("pid (\\d+)")));
  const int pid = std::stoi(m[1].str());
  REQUIRE(::kill(pid, SIGSEGV) == 0);
  const bool reported = job.run->wait_for_line(
      matching("\\[node 1 [^\\]]*\\] troupe: fatal signal SIGSEGV \\(invalid memory access\\) sent by pid " +
               std::to_string(::getpid()) + " in pid " + std::to_string(pid) + ", thread \\d+; backtrace:"),
      seconds(10)).has_value();
  const bool lost =
      job.run->wait_for_line(matching("lost node 1 \\(vm, pid " + std::to_string(pid) + "\\)"), seconds(10)).has_value();
  const bool replaced =
      job.run->wait_for_line(matching("node 1 \\(vm, pid \\d+\\) joined in place of pid " + std::to_string(pid)),
                             seconds(30))
          .has_value();
  INFO(job.log());
  CHECK(reported);
  CHECK(lost);
  CHECK(replaced);
  // UCX's own report (its "Caught signal") is not the one that ran.
  CHECK(job.log().find("Caught signal") == std::string::npos);
}
