#pragma once
// How long each party waits for a rescue snapshot (docs/drills.md, "Recovery"), all from one key,
// fault.rescue_timeout (60 s by default):
//
//   job_wait           the job supervisor's wait for every writer's rescue_done_msg, from the
//                      failure on (JobPlan::rescue_timeout): fault.rescue_timeout
//   commit_timeout     a writer's wait for every stage's shard before writer 0 commits: five sixths
//                      of job_wait (50 s of 60), so that the commit and its report reach the job
//                      before the job stops waiting
//   worker_order_wait  a worker whose collective failed waits this long for the job's word (a
//                      rescue order, or the stop that ends the rescue): job_wait + 5 s, since the
//                      stop comes at the end of the job's wait at the latest
//   launcher_hold      the launcher leaves the survivors running this long after a node's exit
//                      before it stops them itself (the job's outcome ends the hold at once):
//                      job_wait + 5 s, for the same reason
//
// The job process uses job_wait and launcher_hold; each node process derives the same figures
// from the same configuration (its config hash equals the job's).

#include <chrono>

#include "actors/job_options.hpp"

namespace troupe::actors {

struct RescueTiming {
  std::chrono::milliseconds job_wait;
  std::chrono::milliseconds commit_timeout;
  std::chrono::milliseconds worker_order_wait;
  std::chrono::milliseconds launcher_hold;
};

// The margin after the job's wait within which its stop reaches every survivor.
inline constexpr std::chrono::milliseconds rescue_stop_margin{5000};

RescueTiming rescue_timing(double rescue_timeout_seconds);
inline RescueTiming rescue_timing(const FaultOptions& fault) { return rescue_timing(fault.rescue_timeout); }

}  // namespace troupe::actors
