#pragma once
// Prometheus metrics of one process (docs/metrics.md): a registry served over HTTP at
// http://BIND:PORT/metrics, every series labelled with the job and the node, and one handle per
// worker that adds its rank and role. Workers update their handles from their own threads while
// the server's thread scrapes: prometheus-cpp's counters, gauges and histograms are atomic.
//
// What is read at scrape time stays current while no step finishes (loading data, a hung
// collective): the resident memory (/proc/self/statm), the memory by kind, the heartbeat's age,
// and each worker's comm traffic, read through functions the node and its workers register
// (monitor/ knows nothing of comm/ or the memory ledger).

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "compute/expected.hpp"  // header-only: Expected and Error, no link to troupe_compute
#include "monitor/metrics_http.hpp"

namespace prometheus {
class Counter;
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

// One kind of traffic of a worker's comm engine, as its totals stand: `op` is all_reduce,
// reduce_scatter, all_gather, broadcast, barrier, send or recv.
struct TrafficReading {
  std::string op;
  std::uint64_t operations = 0;
  std::uint64_t bytes = 0;
  double seconds = 0;
};
struct CommReading {
  std::vector<TrafficReading> ops;
  std::vector<TrafficReading> tensor_parallel_ops;  // the part of `ops` over the tensor shards' group
  std::vector<TrafficReading> context_ops;          // a context group's ring shifts and all-to-alls
  std::int64_t requests_in_flight = 0;
  std::int64_t collectives_in_flight = 0;
  TrafficReading expert_all_to_all;  // an expert group's all-to-alls, apart from the rest (no op)
};

// A worker's gradient compression, as its totals stand: bytes its gradient sums carried, the
// bytes the same sums would have carried uncompressed, and seconds spent compressing.
struct CompressionReading {
  std::uint64_t wire_bytes = 0;
  std::uint64_t plain_bytes = 0;
  double seconds = 0;
};

// The process's memory by kind as the ledger has it now (compute/memory_ledger.hpp): `device` is
// host or cuda, `kind` one of the ledger's kinds or `total`.
struct MemoryFigure {
  std::string device;
  std::string kind;
  std::uint64_t bytes = 0;
  std::uint64_t peak = 0;
};
using MemoryReading = std::vector<MemoryFigure>;

struct MetricFamilies;
class ScrapeTime;

// One worker's series. Made by NodeMetrics::add_worker, which keeps it alive.
class WorkerMetrics {
 public:
  // A finished optimizer step: `step` counts from the run's start (resumed steps included),
  // `tokens` is what the step consumed over the whole job, as the progress line counts them.
  void step_done(long step, double seconds, std::int64_t tokens, double loss, double lr, double grad_norm);
  // From now on each step also sets troupe_mfu = tokens/s × flops_per_token ÷ (ranks × peak_flops):
  // the job's model FLOP/s over the peak of every rank, this one's assumed for all.
  void set_mfu_basis(double flops_per_token, int ranks, double peak_flops);
  // The MFU of a step at `tokens_per_second` (the job's): 0 before set_mfu_basis or without a peak.
  double mfu(double tokens_per_second) const;
  // A pipeline stage's idle share of its last step's schedule (before the gradient sums).
  void set_bubble_fraction(double fraction);
  // A checkpoint save that held training up for `seconds` and wrote `bytes` of this rank's state.
  void checkpoint_saved(double seconds, std::uint64_t bytes);
  // A DiLoCo outer sync landed (one fragment's, under streaming): `bytes` this rank sent for its
  // sum over `islands` islands (those present in it).
  void outer_synced(std::uint64_t bytes, int islands);
  // A step's routing in a model with experts: `slots` holds, block by block in layer order, the
  // token-slots this rank's tokens sent to each of `experts` experts (added to
  // troupe_moe_expert_slots_total{block, expert}); `load_imbalance` the most loaded expert's
  // slots over the mean in the worst block.
  void experts_routed(const std::vector<std::int64_t>& slots, int experts, double load_imbalance);
  // The share of each step's global batch this rank's data replica takes (train.balance; 1/replicas
  // when the split is even).
  void set_batch_share(double share);
  // Under train.balance dynamic: the replica's measured seconds per micro-batch (its forward and
  // backward), the mean over the balance window.
  void set_micro_batch_seconds(double seconds);
  // Read at every scrape from the server's thread; `read` must stay callable for the process's
  // life (capture shared state, not references to what may go first). Called once, while setting up.
  void read_comm_from(std::function<CommReading()> read);
  // The same for gradient compression (troupe_compress_*), for workers that compress; a second
  // call replaces the first (a worker that runs again).
  void read_compression_from(std::function<CompressionReading()> read);

 private:
  friend class NodeMetrics;
  WorkerMetrics(MetricFamilies& families, int rank, const std::string& role, ScrapeTime& scrape_time);

  std::map<std::string, std::string> labels_;
  ScrapeTime& scrape_time_;
  prometheus::Histogram& step_seconds_;
  prometheus::Counter& steps_;
  prometheus::Gauge& step_;
  prometheus::Gauge& tokens_per_second_;
  prometheus::Gauge& loss_;
  prometheus::Gauge& learning_rate_;
  prometheus::Gauge& grad_norm_;
  prometheus::Gauge& mfu_;
  prometheus::Gauge& peak_flops_;
  prometheus::Gauge& bubble_fraction_;
  prometheus::Histogram& checkpoint_seconds_;
  prometheus::Counter& checkpoint_bytes_;
  prometheus::Counter& outer_syncs_;
  prometheus::Counter& outer_bytes_;
  prometheus::Gauge& islands_;
  prometheus::Family<prometheus::Counter>& expert_slots_family_;
  std::vector<prometheus::Counter*> expert_slots_;  // per (block, expert), made at the first step
  prometheus::Gauge& load_imbalance_;
  prometheus::Gauge& batch_share_;
  prometheus::Gauge& micro_batch_seconds_;
  double flops_per_token_ = 0;
  double job_peak_flops_ = 0;
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

  // This node sent a heartbeat to the job now: troupe_heartbeat_age_seconds counts from here.
  void heartbeat_sent();
  // `count` failures of `kind` (node_lost, worker_exception, hang, …) this process saw or was told of.
  void count_failure(const std::string& kind, long count = 1);
  // `count` recoveries whose state came from `source` (replica, checkpoint, shrink) by `path`
  // (in_place: only what died was respawned; restart: every node restarted).
  void count_recovery(const std::string& source, const std::string& path, long count = 1);
  // Adds to troupe_restarts_total: a restarted node process starts its counter at the job's count.
  void count_restarts(long restarts);
  // troupe_memory_bytes and troupe_memory_peak_bytes, read at every scrape from the server's
  // thread (monitor/ knows nothing of the ledger). Called once, while setting up.
  void read_memory_from(std::function<MemoryReading()> read);

 private:
  NodeMetrics(std::string bind, MetricsIdentity identity);

  std::string bind_;
  int port_ = 0;
  std::shared_ptr<prometheus::Registry> registry_;
  std::shared_ptr<ScrapeTime> scrape_time_;
  std::unique_ptr<MetricFamilies> families_;
  std::vector<std::unique_ptr<WorkerMetrics>> workers_;
  // Declared after what it serves, so it goes first: its thread may be collecting.
  std::unique_ptr<MetricsHttpServer> server_;
};

}  // namespace troupe::monitor
