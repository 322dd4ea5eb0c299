#pragma once
// The job's web page (docs/web.md): one HTTP port of the job process (monitor.web_port on
// monitor.control_bind) that serves, to holders of the job's control token only,
//   /          the page (HTML, script and style in one document, nothing from elsewhere),
//   /data      the page's data as JSON, the rank grid paged (?page=P&per_page=N),
//   /metrics   the job's own Prometheus series.
// The token comes as ?token=T in the URL, or in an `Authorization: Bearer T` header; any request
// without it, or with another, gets 401 and nothing else. Read-only: the shell gives orders.
// The job process publishes a snapshot whenever its view changes; requests read the newest.
// Slow or idle clients are handled as /metrics' are (monitor/metrics_http.hpp).

#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "compute/expected.hpp"
#include "monitor/job_snapshot.hpp"
#include "monitor/metrics_http.hpp"

namespace troupe::monitor {

class JobWeb {
 public:
  static constexpr int default_tiles_per_page = 256;

  static Expected<std::unique_ptr<JobWeb>> serve(const std::string& bind, int port, std::string token);

  void publish(JobSnapshot snapshot);
  int port() const { return server_->port(); }
  // http://BIND:PORT/?token=… — the page's address for a person (it holds the token).
  std::string url() const;
  // What a request gets; public for the tests of routing and the token.
  HttpReply answer(std::string_view target, std::string_view head) const;

 private:
  JobWeb(std::string bind, std::string token) : bind_(std::move(bind)), token_(std::move(token)) {}
  bool authorized(std::string_view target, std::string_view head) const;

  std::string bind_;
  std::string token_;
  mutable std::mutex mutex_;
  std::shared_ptr<const JobSnapshot> snapshot_ = std::make_shared<JobSnapshot>();
  std::unique_ptr<MetricsHttpServer> server_;  // last: goes first, its thread may be answering
};

// The page itself (monitor/job_page_html.cpp).
std::string_view job_page_html();

}  // namespace troupe::monitor
