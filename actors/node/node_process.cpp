// A node process (node_process.hpp): set-up per slot, the join, and the workers' work.

#include "actors/node/node_process.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <mutex>
#include <thread>

#include "actors/actor_system_setup.hpp"
#include "actors/idle_class.hpp"
#include "actors/node/node_control.hpp"
#include "actors/node/node_supervisor.hpp"
#include "actors/process_logs.hpp"
#include "actors/process_metrics.hpp"
#include "actors/worker/device_groups.hpp"
#include "actors/worker/job_data.hpp"
#include "actors/worker/rank_wiring.hpp"
#include "comm/engine.hpp"
#include "comm/grid.hpp"
#include "compute/backend.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {
namespace {

NodeOutcome setup_failed(std::string reason, int exit_code) { return {exit_code, std::move(reason), true}; }

// The IPv4 address this host sends from towards `job_host`: what the job sees as the source of
// this node's connection, so it can tell which node sat behind a connection that timed out. A UDP
// socket's connect() only asks the routing table; nothing is sent. Empty when it cannot be had.
std::string outward_address(const std::string& job_host) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(job_host.c_str(), "9", &hints, &found) != 0 || found == nullptr) return {};
  std::string address;
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_in local{};
  socklen_t length = sizeof local;
  char text[INET_ADDRSTRLEN] = {};
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0 &&
      ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text) != nullptr)
    address = text;
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return address;
}

// The modelled links of this node process's ranks when they are simulated (train.backend sim).
std::optional<comm::WireModel> wire_model(const JobConfig& config, int first_rank, int slots) {
  if (config.train.backend != compute::BackendKind::sim) return std::nullopt;
  const compute::SimOptions& sim = config.sim;
  return comm::WireModel{first_rank,
                         slots,
                         sim.link_bandwidth_intra,
                         sim.link_bandwidth_inter,
                         sim.link_latency_intra,
                         sim.link_latency_inter};
}

}  // namespace

NodeOutcome run_node_process(const NodeProcessOptions& options, const ResolvedJob& job) {
  const monitor::MetricsIdentity identity{metrics_job_label(options.token), std::max(options.node_index, 0)};
  const ProcessLogs logs(job.config, identity.job, identity.node, options.first_rank, "node", options.slots);
  auto metrics = ProcessMetrics::serve(job.config.monitor, identity, options.first_rank, options.slots, "worker");
  if (!metrics) return setup_failed(metrics.error().message, 2);

  // train.threads 0 means all cores; the workers of every node process on one machine share them.
  const int local_workers = std::max(1, options.local_world_size);
  const int threads = job.config.train.threads > 0
                          ? job.config.train.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / local_workers);
  auto data = load_job_data(job);
  if (!data) return setup_failed(data.error().message, 2);
  if (Status opened = logs.open_file(); !opened) return setup_failed(opened.error().message, 2);
  // Each slot is a rank with its own backend (scratch buffers are not shared between threads)
  // and its own engine (UCX worker and progress thread: a rank's tag space is its own).
  std::vector<std::unique_ptr<compute::Backend>> backends;
  std::vector<std::unique_ptr<comm::Engine>> engines;
  const int local_rank_base = options.local_rank_base;
  const bool on_device = compute::on_device(job.config.train.backend);
  const std::optional<comm::WireModel> wire = wire_model(job.config, options.first_rank, options.slots);
  for (int slot = 0; slot < options.slots; ++slot) {
    if (on_device) {
      // The backend's stream and cuBLAS handle belong to the device current when it is made.
      if (Status s = use_rank_device(local_rank_base + slot); !s) return setup_failed(s.error().message, 2);
    }
    auto backend = compute::make_backend(job.config.train.backend, job.config.train.precision, threads, job.config.sim);
    if (!backend) return setup_failed(backend.error().message, 2);
    backends.push_back(std::move(*backend));
    auto engine = comm::Engine::create(options.first_rank + slot, options.world_size, wire);
    if (!engine) return setup_failed(engine.error().message, 1);
    engines.push_back(std::move(*engine));
    if (monitor::WorkerMetrics* worker = metrics->worker(slot))
      worker->read_comm_from([traffic = engines.back()->traffic()] { return comm_reading(*traffic); });
  }
  const std::int64_t peak_flops = metrics->set_mfu_basis(job, options.world_size, options.peak_flops);
  // The job process counts failures, recoveries and restarts (TROUPE_RESTARTS); a restarted node
  // process starts its counters there, so every node's /metrics shows the job's history.
  if (monitor::NodeMetrics* node = metrics->node()) {
    node->count_restarts(options.recovery.restarts);
    for (const auto& [kind, count] : options.recovery.failures) node->count_failure(std::string(to_string(kind)), count);
    for (const auto& [source, count] : options.recovery.recoveries)
      if (source == RecoverySource::in_place)
        node->count_recovery(std::string(to_string(RecoverySource::replica)),
                             std::string(to_string(RecoveryMode::in_place)), count);
      else
        node->count_recovery(std::string(to_string(source)), std::string(to_string(RecoveryMode::restart)), count);
  }

  NodeControl control(options.first_rank, options.slots);  // outlives the workers, which obey it
  TroupeConfig cfg;
  beat_connections(cfg, job.config.fault, true);
  caf::actor_system system{cfg};
  const auto first_try = std::chrono::steady_clock::now();
  auto supervisor = system.middleman().remote_actor(options.join_host, static_cast<std::uint16_t>(options.join_port));
  const auto keep_trying = [&] {
    const auto waited = std::chrono::steady_clock::now() - first_try;
    return waited < options.join_patience ||
           (supervisor.error() == caf::sec::connection_timeout && waited < options.handshake_patience);
  };
  while (!supervisor && keep_trying()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    supervisor = system.middleman().remote_actor(options.join_host, static_cast<std::uint16_t>(options.join_port));
  }
  if (!supervisor) return setup_failed("cannot reach the job at " + options.join_host + ":" + std::to_string(options.join_port) + ": " + to_string(supervisor.error()), 1);

  join_msg hello;
  hello.token = options.token;
  hello.attempt = options.attempt;
  hello.build_id = options.build_id;
  hello.config_hash = options.config_hash;
  hello.node_index = options.node_index;
  hello.host = options.host_name;
  hello.pid = static_cast<int>(::getpid());
  hello.address = outward_address(options.join_host);
  hello.peak_flops = peak_flops;
  for (const auto& engine : engines) hello.comm_addresses.push_back(byte_blob{engine->address()});
  if (on_device) {
    const int stages = job.config.pipeline.stages;
    auto ids = lead_device_groups(comm::Grid{options.world_size / stages, stages, 1}, options.first_rank, options.slots);
    if (!ids) return setup_failed(ids.error().message, 1);
    hello.device_group_ids = std::move(*ids);
  }
  std::once_flag entered_idle_class;
  NodeWork work = [&](const start_msg& start, int slot, caf::blocking_actor* worker, monitor::WorkProgress& progress,
                      const std::optional<recover_msg>& replacing) {
    // Sim ranks, hundreds of threads on a few cores, would take them from the job process, the
    // shell and a drill: from their start on they run in the idle class. Not before: a process
    // started again in place of a lost one loads its data, makes its engines and joins ahead of
    // the survivors' ranks (docs/scale.md).
    if (job.config.train.backend == compute::BackendKind::sim)
      std::call_once(entered_idle_class, [&] {
        if (Status idle = enter_idle_scheduling_class(); !idle.ok())
          monitor::logger("node")->warn("its sim ranks keep the normal scheduling class: {}", idle.error().message);
      });
    // A node that srun, torchrun or a person started brings its own WORLD_SIZE: the job's must match,
    // until the job grows in place.
    const bool grown = start.batch_size > 0;
    if (!grown && start.world_size != options.world_size)
      return node_done_msg{options.node_index, 2,
                           "its WORLD_SIZE " + std::to_string(options.world_size) + " differs from the job's " +
                               std::to_string(start.world_size) + " ranks"};
    const auto index = static_cast<std::size_t>(slot);
    const ResolvedJob current =
        grown ? split_batch(job, start.batch_size, start.grad_accum, start.replica_speeds) : job;
    return train_as_rank(current, *data, *backends[index], *engines[index], local_rank_base + slot, start, worker,
                         progress, metrics->worker(slot), control.slot(slot), replacing);
  };
  NodeOptions node_options;
  node_options.heartbeat_interval = std::chrono::milliseconds(std::lround(job.config.fault.heartbeat_seconds * 1000));
  node_options.oldest_receive = [&engines](int slot) {
    auto wait = engines[static_cast<std::size_t>(slot)]->oldest_pending_receive();
    return wait ? comm::describe(*wait, std::chrono::steady_clock::now()) : std::string{};
  };
  if (monitor::NodeMetrics* node = metrics->node()) node_options.heartbeat_sent = [node] { node->heartbeat_sent(); };
  node_options.control = [&control](const control_msg& order) { return control.obey(order); };
  if (monitor::NodeMetrics* node = metrics->node())
    node_options.recovered = [node](const training_resumed& resumed) {
      const RecoverySource source =
          resumed.route == RecoveryRoute::in_place_rollback ? RecoverySource::checkpoint : RecoverySource::replica;
      node->count_failure(std::string(to_string(resumed.kind)));
      node->count_recovery(std::string(to_string(source)), std::string(to_string(RecoveryMode::in_place)));
    };
  caf::scoped_actor self{system};
  spawn_node_supervisor(system, *supervisor, std::move(hello), work, std::move(node_options), self);
  NodeOutcome ended{1, "the job ended without an outcome", false};
  self->receive([&](done_atom, const job_outcome_msg& outcome) { ended = {outcome.exit_code, outcome.reason, false}; });
  // A worker held or paused at a step boundary would keep the actor system from shutting down.
  control.stop_all();
  return ended;
}


}  // namespace troupe::actors
