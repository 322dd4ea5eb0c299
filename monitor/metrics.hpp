#pragma once
// Prometheus metrics of one process (docs/metrics.md): a registry served over HTTP at
// http://BIND:PORT/metrics, every series labelled with the job and the node, and one handle per
// worker that adds its rank and role. Workers update their handles from their own threads while
// the exposer's threads scrape: prometheus-cpp's counters, gauges and histograms are atomic.
//
// The resident memory is read from /proc/self/statm when scraped, so it stays current while no
// step finishes (loading data, a hung collective).

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "compute/expected.hpp"  // header-only: Expected and Error, no link to troupe_compute

namespace prometheus {
class Counter;
class Exposer;
class Gauge;
class Histogram;
class Registry;
template <typename T>
class Family;
}  // namespace prometheus

namespace troupe::monitor {

struct MetricsEndpoint {
  std::string bind = "127.0.0.1";  // a numeric IPv4 address of this host; 0.0.0.0 = every interface
  int port = 0;                    // 0 = any free port
};

// The constant labels of every series a process exports.
struct MetricsIdentity {
  std::string job;
  int node = 0;
};

// One worker's series. Made by NodeMetrics::add_worker, which keeps it alive.
class WorkerMetrics {
 public:
  // A finished optimizer step: `step` counts from the run's start (resumed steps included),
  // `tokens` is what the step consumed over the whole job, as the progress line counts them.
  void step_done(long step, double seconds, std::int64_t tokens, double loss, double lr, double grad_norm);

 private:
  friend class NodeMetrics;
  WorkerMetrics(prometheus::Histogram& step_seconds, prometheus::Counter& steps, prometheus::Gauge& step,
                prometheus::Gauge& tokens_per_second, prometheus::Gauge& loss, prometheus::Gauge& learning_rate,
                prometheus::Gauge& grad_norm);

  prometheus::Histogram& step_seconds_;
  prometheus::Counter& steps_;
  prometheus::Gauge& step_;
  prometheus::Gauge& tokens_per_second_;
  prometheus::Gauge& loss_;
  prometheus::Gauge& learning_rate_;
  prometheus::Gauge& grad_norm_;
};

class NodeMetrics {
 public:
  // Listens on endpoint.bind:endpoint.port; an Error naming both when that fails (the port is
  // taken, or the address is not this host's).
  static Expected<std::unique_ptr<NodeMetrics>> serve(const MetricsEndpoint& endpoint, MetricsIdentity identity);
  ~NodeMetrics();
  NodeMetrics(const NodeMetrics&) = delete;
  NodeMetrics& operator=(const NodeMetrics&) = delete;

  int port() const { return port_; }  // the one listened on: the free port picked for port 0
  std::string url() const;            // "http://127.0.0.1:PORT/metrics"
  // A worker's handle, its series labelled rank and role. Called while setting up, from one thread.
  WorkerMetrics& add_worker(int rank, const std::string& role);

 private:
  class ProcessCollectable;
  NodeMetrics(std::unique_ptr<prometheus::Exposer> exposer, std::string bind, MetricsIdentity identity);

  std::string bind_;
  int port_ = 0;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<ProcessCollectable> process_;
  // Declared after what it serves, so it goes first: its threads may be collecting.
  std::unique_ptr<prometheus::Exposer> exposer_;
  prometheus::Family<prometheus::Histogram>* step_seconds_ = nullptr;
  prometheus::Family<prometheus::Counter>* steps_ = nullptr;
  prometheus::Family<prometheus::Gauge>* step_ = nullptr;
  prometheus::Family<prometheus::Gauge>* tokens_per_second_ = nullptr;
  prometheus::Family<prometheus::Gauge>* loss_ = nullptr;
  prometheus::Family<prometheus::Gauge>* learning_rate_ = nullptr;
  prometheus::Family<prometheus::Gauge>* grad_norm_ = nullptr;
  std::vector<std::unique_ptr<WorkerMetrics>> workers_;
};

}  // namespace troupe::monitor
