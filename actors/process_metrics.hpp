#pragma once
// The Prometheus endpoint of one troupe process (docs/metrics.md) and its workers' handles:
// `troupe node` has one worker per slot, `troupe train` one. monitor.metrics_port P > 0 puts
// node i on port P + i, so the node processes of one machine do not collide; 0 lets each pick a
// free port; -1 turns metrics off.

#include <memory>
#include <string>
#include <vector>

#include "actors/job_options.hpp"
#include "comm/traffic.hpp"
#include "compute/expected.hpp"
#include "monitor/metrics.hpp"

namespace troupe::actors {

class ProcessMetrics {
 public:
  // Listens as `options` say and logs "metrics on http://…/metrics" (subsystem monitor); workers
  // are ranks first_rank, first_rank + 1, … with `role`. An Error (bad input: exit 2) names
  // the keys when the port cannot be listened on.
  static Expected<ProcessMetrics> serve(const MonitorOptions& options, const monitor::MetricsIdentity& identity,
                                        int first_rank, int workers, const std::string& role);

  // The handle of worker `index`; null when metrics are off.
  monitor::WorkerMetrics* worker(int index) const;
  // The process's own series (heartbeat, failures, restarts); null when metrics are off.
  monitor::NodeMetrics* node() const { return node_.get(); }

  // Gives every worker troupe_mfu's basis: the model's FLOPs per token at train.seq_len over
  // `ranks` times a rank's peak, monitor.peak_flops or else, on the CPU backend, OpenBLAS' sgemm
  // measured now with the threads the backend set (a fraction of a second); logs the peak. No
  // MFU on another backend without monitor.peak_flops; nothing at all when metrics are off.
  // The MFU basis of every worker: monitor.peak_flops, else `inherited` (what the process this one
  // replaces measured; 0: none), else OpenBLAS sgemm measured now on the CPU backend. Returns the
  // peak taken, 0 when none (metrics off, or a device backend without monitor.peak_flops).
  std::int64_t set_mfu_basis(const ResolvedJob& job, int ranks, std::int64_t inherited) const;

 private:
  std::unique_ptr<monitor::NodeMetrics> node_;
  std::vector<monitor::WorkerMetrics*> workers_;
};

// A comm engine's traffic as the metrics read it at a scrape.
monitor::CommReading comm_reading(const comm::Traffic& traffic);

// The process's memory ledger as the metrics and the heartbeat read it: every kind on the host and
// their `total` (whose peak is the sum's own), then the same on the device when a device backend
// ever allocated there.
monitor::MemoryReading memory_reading();

// The job label of a node's metrics: the first 8 hex digits of XXH64(token), the same on every
// node of a job, without publishing any part of the token (it guards the control port).
std::string metrics_job_label(const std::string& token);

}  // namespace troupe::actors
