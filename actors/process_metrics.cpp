#include "actors/process_metrics.hpp"

#include <xxhash.h>

#include <spdlog/fmt/fmt.h>

#include "compute/cpu/sgemm_peak.hpp"
#include "compute/memory_ledger.hpp"
#include "compute/model/flops.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {

Expected<ProcessMetrics> ProcessMetrics::serve(const MonitorOptions& options, const monitor::MetricsIdentity& identity,
                                               int first_rank, int workers, const std::string& role) {
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
  metrics.node_->read_memory_from(memory_reading);
  monitor::logger("monitor")->info("metrics on {}", metrics.node_->url());
  return metrics;
}

monitor::WorkerMetrics* ProcessMetrics::worker(int index) const { return workers_.at(static_cast<std::size_t>(index)); }

std::int64_t ProcessMetrics::set_mfu_basis(const ResolvedJob& job, int ranks, std::int64_t inherited) const {
  if (!node_) return 0;
  const MonitorOptions& options = job.config.monitor;
  double peak = options.peak_flops;
  std::string source = "monitor.peak_flops";
  if (peak <= 0 && inherited > 0) {
    peak = static_cast<double>(inherited);
    source = "measured by the process this one replaces";
  } else if (peak <= 0 && job.config.train.backend == compute::BackendKind::cpu) {
    peak = compute::cpu::measure_sgemm_peak({1024});
    source = "OpenBLAS sgemm, measured";
  } else if (peak <= 0 && job.config.train.backend == compute::BackendKind::sim) {
    peak = job.config.sim.flops;
    source = "sim.flops";
  }
  if (peak <= 0) {
    monitor::logger("monitor")->info("no MFU: set monitor.peak_flops to a rank's peak FLOP/s on {}",
                                     compute::backend_name(job.config.train.backend));
    return 0;
  }
  const double flops_per_token = compute::model_flops_per_token(job.model, job.config.train.seq_len);
  for (monitor::WorkerMetrics* worker : workers_) worker->set_mfu_basis(flops_per_token, ranks, peak);
  monitor::logger("monitor")->info("MFU over {:.1f} GFLOP/s a rank ({}), {:.3g} model FLOPs a token", peak / 1e9,
                                   source, flops_per_token);
  return std::llround(peak);
}

monitor::CommReading comm_reading(const comm::Traffic& traffic) {
  monitor::CommReading reading;
  for (std::size_t k = 0; k < comm::traffic_kinds; ++k) {
    const auto kind = static_cast<comm::TrafficKind>(k);
    const comm::TrafficTotals& totals = traffic.totals(kind);
    reading.ops.push_back({comm::traffic_name(kind), totals.operations.load(), totals.bytes.load(),
                           static_cast<double>(totals.nanoseconds.load()) * 1e-9});
    const comm::TrafficTotals& shards = traffic.tensor_parallel_totals(kind);
    if (kind != comm::TrafficKind::send && kind != comm::TrafficKind::recv)
      reading.tensor_parallel_ops.push_back({comm::traffic_name(kind), shards.operations.load(), shards.bytes.load(),
                                             static_cast<double>(shards.nanoseconds.load()) * 1e-9});
  }
  for (std::size_t k = 0; k < comm::context_traffic_kinds; ++k) {
    const auto kind = static_cast<comm::ContextTraffic>(k);
    const comm::TrafficTotals& totals = traffic.context_totals(kind);
    reading.context_ops.push_back({comm::context_traffic_name(kind), totals.operations.load(), totals.bytes.load(),
                                   static_cast<double>(totals.nanoseconds.load()) * 1e-9});
  }
  const comm::TrafficTotals& experts = traffic.expert_totals();
  reading.expert_all_to_all = {"", experts.operations.load(), experts.bytes.load(),
                               static_cast<double>(experts.nanoseconds.load()) * 1e-9};
  reading.requests_in_flight = traffic.requests_in_flight.load();
  reading.collectives_in_flight = traffic.collectives_in_flight.load();
  return reading;
}

monitor::MemoryReading memory_reading() {
  monitor::MemoryReading reading;
  const compute::MemoryLedger& ledger = compute::memory_ledger();
  for (const auto& [device, name] : {std::pair{compute::Device::cpu, "host"}, std::pair{compute::Device::cuda, "cuda"}}) {
    const compute::MemoryReport report = ledger.report(device);
    if (device != compute::Device::cpu && report.total.peak == 0) continue;  // no device memory ever
    for (compute::MemoryKind kind : compute::memory_kinds)
      reading.push_back({name, std::string(compute::memory_kind_name(kind)), report[kind].bytes, report[kind].peak});
    reading.push_back({name, "total", report.total.bytes, report.total.peak});
  }
  return reading;
}

std::string metrics_job_label(const std::string& token) {
  return fmt::format("{:016x}", XXH64(token.data(), token.size(), 0)).substr(0, 8);
}

}  // namespace troupe::actors
