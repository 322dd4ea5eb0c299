#pragma once
// The Prometheus endpoint of one troupe process (docs/metrics.md) and its workers' handles:
// `troupe node` has one worker per slot, `troupe train` one. monitor.metrics_port P > 0 puts
// node i on port P + i, so the node processes of one machine do not collide; 0 lets each pick a
// free port; -1 turns metrics off.

#include <memory>
#include <string>
#include <vector>

#include "apps/job_config.hpp"
#include "compute/expected.hpp"
#include "monitor/metrics.hpp"

namespace troupe::apps {

class ProcessMetrics {
 public:
  // Listens as `options` say and logs "metrics on http://…/metrics" to `logger_name`; workers
  // are ranks first_rank, first_rank + 1, … with `role`. An Error (bad input: exit 2) names
  // the keys when the port cannot be listened on.
  static Expected<ProcessMetrics> serve(const MonitorOptions& options, const monitor::MetricsIdentity& identity,
                                        int first_rank, int workers, const std::string& role,
                                        const std::string& logger_name);

  // The handle of worker `index`; null when metrics are off.
  monitor::WorkerMetrics* worker(int index) const;

 private:
  std::unique_ptr<monitor::NodeMetrics> node_;
  std::vector<monitor::WorkerMetrics*> workers_;
};

// The job label of a node's metrics: the first 8 hex digits of XXH64(token), the same on every
// node of a job, without publishing any part of the token (it guards the control port).
std::string metrics_job_label(const std::string& token);

}  // namespace troupe::apps
