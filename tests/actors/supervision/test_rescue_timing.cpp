// The rescue's waits (actors/supervision/rescue_timing.hpp), all from fault.rescue_timeout: the
// default keeps the figures the job has always used, and every wait keeps its place relative to
// the job's for any value resolve() accepts.

#include <catch2/catch.hpp>

#include "actors/supervision/rescue_timing.hpp"

using namespace troupe::actors;
using std::chrono::milliseconds;

TEST_CASE("the default fault.rescue_timeout gives the job 60 s, the writers 50 s, the workers and launcher 65 s",
          "[recovery]") {
  const RescueTiming t = rescue_timing(FaultOptions{});
  CHECK(t.job_wait == milliseconds(60000));
  CHECK(t.commit_timeout == milliseconds(50000));
  CHECK(t.worker_order_wait == milliseconds(65000));
  CHECK(t.launcher_hold == milliseconds(65000));
}

TEST_CASE("every rescue wait follows fault.rescue_timeout", "[recovery]") {
  for (double seconds : {1.0, 2.5, 12.0, 60.0, 600.0, 3600.0}) {
    INFO(seconds << " s");
    FaultOptions fault;
    fault.rescue_timeout = seconds;
    const RescueTiming t = rescue_timing(fault);
    CHECK(t.job_wait == milliseconds(static_cast<long>(seconds * 1000)));
    // A writer commits while the job still waits, with a sixth of its wait left to report.
    CHECK(t.commit_timeout > milliseconds(0));
    CHECK(t.commit_timeout < t.job_wait);
    CHECK(t.job_wait - t.commit_timeout >= t.job_wait / 6 - milliseconds(1));
    // The survivors outlast the job's wait, so the job's stop, not their own clock, ends them.
    CHECK(t.worker_order_wait == t.job_wait + milliseconds(5000));
    CHECK(t.launcher_hold == t.job_wait + milliseconds(5000));
  }
}
