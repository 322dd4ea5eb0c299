#pragma once
// The job's web page data endpoint and job-level /metrics, rendered from a JobSnapshot
// (docs/protocols/web.md pins both).

#include <string>

#include <nlohmann/json.hpp>

#include "monitor/job_snapshot.hpp"

namespace troupe::monitor {

// The grid pages: at most this many tiles a page.
inline constexpr int max_tiles_per_page = 1024;

// The data endpoint's JSON: the job's summary, page `page` (from 0) of the rank tiles with
// `per_page` a page (1 to max_tiles_per_page) and the count by state of every rank, the curves,
// the timeline and the memory by node. A page past the last gives no tiles.
nlohmann::json page_data(const JobSnapshot& snapshot, int page, int per_page);

// The Prometheus exposition of the job's own series: troupe_job_ranks{state}, troupe_job_recoveries_total{path},
// troupe_job_step, troupe_job_loss, troupe_job_tokens_per_second, troupe_job_attempt and
// troupe_job_seconds_since_checkpoint (-1: none yet) as of `now_unix_seconds`.
std::string job_metrics_text(const JobSnapshot& snapshot, double now_unix_seconds);

}  // namespace troupe::monitor
