#include "apps/process_metrics.hpp"

#include <xxhash.h>

#include <spdlog/fmt/fmt.h>

#include "monitor/log.hpp"

namespace troupe::apps {

Expected<ProcessMetrics> ProcessMetrics::serve(const MonitorOptions& options, const monitor::MetricsIdentity& identity,
                                               int first_rank, int workers, const std::string& role,
                                               const std::string& logger_name) {
  ProcessMetrics metrics;
  metrics.workers_.assign(static_cast<std::size_t>(workers), nullptr);
  if (options.metrics_port < 0) return metrics;
  const bool fixed_port = options.metrics_port > 0;
  const std::string which = fixed_port ? fmt::format("monitor.metrics_port {} + node {}", options.metrics_port,
                                                     identity.node)
                                       : "monitor.metrics_bind " + options.metrics_bind;
  const int port = fixed_port ? options.metrics_port + identity.node : 0;
  if (port > 65535) return Error{fmt::format("{}: port {} is past 65535", which, port)};
  auto node = monitor::NodeMetrics::serve({options.metrics_bind, port}, identity);
  if (!node) return Error{which + ": " + node.error().message};
  metrics.node_ = std::move(*node);
  for (int index = 0; index < workers; ++index)
    metrics.workers_[static_cast<std::size_t>(index)] = &metrics.node_->add_worker(first_rank + index, role);
  monitor::logger(logger_name)->info("metrics on {}", metrics.node_->url());
  return metrics;
}

monitor::WorkerMetrics* ProcessMetrics::worker(int index) const { return workers_.at(static_cast<std::size_t>(index)); }

std::string metrics_job_label(const std::string& token) {
  return fmt::format("{:016x}", XXH64(token.data(), token.size(), 0)).substr(0, 8);
}

}  // namespace troupe::apps
