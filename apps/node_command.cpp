// troupe node: one node process of a job. It joins the job supervisor (address, token and node
// index from the flags or from TROUPE_JOIN / TROUPE_TOKEN / TROUPE_NODE_INDEX, which troupe
// launch sets), brings up one comm engine and one compute backend per slot (TROUPE_SLOTS; the
// slots' ranks are RANK, RANK + 1, …), and, once the job starts, trains each rank in its own
// worker actor: as a data-parallel replica, gradients are summed over all ranks by the ring
// all-reduce before clipping and AdamW, so every rank takes the same step (on a CUDA backend by
// NCCL, each rank on its host's device LOCAL_RANK + slot); as a pipeline stage, it runs its
// schedule. The collectives' completions reach the worker as messages.

#include <unistd.h>

#include <cstdio>
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <thread>

#include "actors/actor_system_setup.hpp"
#include "actors/node_supervisor.hpp"
#include "apps/commands.hpp"
#include "apps/device_groups.hpp"
#include "apps/job_data.hpp"
#include "apps/job_identity.hpp"
#include "apps/launch/local_host.hpp"
#include "apps/node_control.hpp"
#include "apps/node_rescue.hpp"
#include "apps/recovery_counts.hpp"
#include "apps/process_logs.hpp"
#include "apps/process_metrics.hpp"
#include "actors/data_parallel_hooks.hpp"
#include "actors/mailbox_comm.hpp"
#include "actors/pipeline_trainer.hpp"
#include "actors/trace_gather.hpp"
#include "apps/training_run.hpp"
#include "comm/collectives.hpp"
#include "comm/grid.hpp"
#include "compute/model/parameter_layout.hpp"
#include "compute/model/stage_split.hpp"
#include "monitor/log.hpp"
#include "schedules/checker.hpp"
#include "schedules/generate.hpp"

namespace troupe::apps {
namespace {

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

// This rank's stage of a pipeline (grid.pp > 1), as the job's schedule has it.
RunOutcome train_pipeline_stage(const ResolvedJob& job, const JobData& data, compute::Backend& backend,
                                comm::Engine& engine, const comm::Grid& grid, comm::Communicator& dp,
                                actors::MailboxComm& mailbox, monitor::WorkProgress& progress,
                                monitor::WorkerMetrics* metrics, monitor::StepControl& control,
                                const RescueHooks& rescue) {
  const PipelineOptions& p = job.config.pipeline;
  const int rank = engine.rank();
  const comm::GridCoord coord = comm::grid_coord(grid, rank);
  auto kind = schedules::parse_schedule_kind(p.schedule);
  auto schedule = kind ? schedules::generate_schedule(*kind, p.stages, p.microbatches, p.virtual_stages)
                       : Expected<schedules::Schedule>(kind.error());
  if (!schedule) return {2, schedule.error().message};
  auto report = schedules::check_schedule(*schedule);
  TROUPE_CHECK(report.ok(), report ? "" : report.error().message);
  auto pp = comm::Communicator::create(engine, comm::pp_group(grid, rank));
  if (!pp) return {1, pp.error().message};
  std::unique_ptr<comm::Communicator> embedding;
  if (coord.pp == 0 || coord.pp == grid.pp - 1) {
    auto created = comm::Communicator::create(engine, comm::embedding_group(grid, rank));
    if (!created) return {1, created.error().message};
    embedding = std::move(*created);
  }
  if (rank == 0) {
    auto split = p.virtual_stages > 1 ? compute::split_layers_interleaved(job.model, p.stages, p.virtual_stages)
                                      : compute::split_layers(job.model, p.stages);
    std::string text;
    for (std::size_t vs = 0; vs < split->size(); ++vs) {
      const compute::StageLayers& l = (*split)[vs];
      text += fmt::format("{}stage {}{}: blocks {}-{} ({:.2f}M parameters)", vs ? "; " : "",
                          schedule->stage_of(static_cast<int>(vs)),
                          p.virtual_stages > 1 ? fmt::format(" chunk {}", schedule->chunk_of(static_cast<int>(vs))) : "",
                          l.first_layer, l.last_layer - 1, l.params / 1e6);
    }
    monitor::logger("train")->info("pipeline split by parameters: {}", text);
  }
  actors::PipelineSetup setup{job.model, *schedule, report->peak_stashed[static_cast<std::size_t>(coord.pp)], grid,
                              rank, trainer_options(job)};
  actors::PipelineTrainer trainer(std::move(setup), backend, {engine, dp, **pp, embedding.get()}, mailbox, progress,
                                  data.train, data.val);
  monitor::TraceRecorder trace;
  if (!p.trace.empty()) trainer.record_into(trace);
  TrainingLoop loop;
  loop.step = [&] {
    compute::StepResult result = trainer.step();
    if (metrics) metrics->set_bubble_fraction(trainer.bubble_fraction());
    return result;
  };
  loop.evaluate = [&](int batches) { return trainer.evaluate(batches); };
  loop.param_norm = [&] { return trainer.param_norm(); };
  loop.tokens_per_step = trainer.tokens_per_step();
  loop.held = trainer.held_state();
  loop.resume_at = [&trainer](long steps) { trainer.resume_at(steps); };
  loop.rank = rank;
  loop.grid = {grid.dp, grid.pp, 1};
  loop.checkpoint_writers = grid.pp;
  loop.metrics = metrics;
  loop.control = &control;
  loop.rescue = rescue;
  loop.layout = fmt::format("{} x {} pipeline, {} micro-batches of {} x seq {}; stage {} holds {} activations at most",
                            grid.dp, p.schedule, p.microbatches, job.config.train.batch_size, job.config.train.seq_len,
                            coord.pp, report->peak_stashed[static_cast<std::size_t>(coord.pp)]);
  RunOutcome outcome = drive_training(job, data, backend.name(), loop, rank == 0, progress);
  const std::vector<int> peaks = trainer.peak_stashed_measured();
  if (rank == 0)
    monitor::logger("train")->info("activations held at most, by stage: {} (the schedule checker's bound: {})",
                                   fmt::join(peaks, " "), fmt::join(report->peak_stashed, " "));
  if (!p.trace.empty() && outcome.exit_code == 0) {
    auto world = comm::Communicator::create(engine, comm::world_group(grid));
    if (!world) return {1, world.error().message};
    if (Status s = actors::gather_trace(mailbox, **world, trace); !s) return {1, "trace: " + s.error().message};
    if (rank == 0) {
      if (Status s = monitor::write_trace(trace, p.trace); !s) return {1, s.error().message};
      monitor::logger("train")->info("trace of every stage's ops written to {} (Chrome trace JSON; Perfetto opens it)",
                                     p.trace);
    }
  }
  return outcome;
}

actors::node_done_msg train_as_rank(const ResolvedJob& job, const JobData& data, compute::Backend& backend,
                                    comm::Engine& engine, int local_rank, const actors::start_msg& start,
                                    caf::blocking_actor* worker, monitor::WorkProgress& progress,
                                    monitor::WorkerMetrics* metrics, monitor::StepControl& control) {
  const RescueHooks rescue = node_rescue_hooks(worker, engine.rank());
  const int rank = engine.rank();
  const bool on_device = is_device_backend(job.config.train.backend);
  if (on_device) {
    if (Status s = use_rank_device(local_rank); !s) return {-1, 2, "rank " + std::to_string(rank) + ": " + s.error().message};
  }
  for (const auto& node : start.nodes) {
    for (int slot = 0; slot < node.slots; ++slot) {
      const int peer = node.first_rank + slot;
      if (peer == rank) continue;
      if (Status s = engine.connect(peer, node.comm_addresses.at(static_cast<std::size_t>(slot)).bytes); !s)
        return {-1, 1, "cannot connect to rank " + std::to_string(peer) + ": " + s.error().message};
    }
  }
  const int stages = job.config.pipeline.stages;
  if (start.world_size % stages != 0)
    return {-1, 2, "pipeline.stages " + std::to_string(stages) + " does not divide the " +
                       std::to_string(start.world_size) + " workers"};
  const comm::Grid grid{start.world_size / stages, stages, 1};
  auto dp = comm::Communicator::create(engine, comm::dp_group(grid, rank));
  if (!dp) return {-1, 1, dp.error().message};
  // Gradients in device memory are summed by NCCL over the same group (resolve() allows only
  // plain data parallelism there); its communicator lives as long as the training.
  std::unique_ptr<DeviceGroup> device_group;
  if (on_device) {
    auto joined = DeviceGroup::join(start, grid, rank, backend);
    if (!joined) return {-1, 1, joined.error().message};
    device_group = std::move(*joined);
    monitor::logger("comm")->info("rank {}: gradients summed by NCCL over {}", rank,
                                  comm::dp_group(grid, rank).describe());
  }
  try {
    actors::MailboxComm mailbox(worker);
    auto data_parallel = [&] {
      compute::DataParallel host = actors::group_data_parallel(mailbox, **dp, progress, job.config.train.zero,
                                                               compute::ParameterLayout(job.model).total());
      return device_group ? device_group->data_parallel(std::move(host), mailbox, progress) : host;
    };
    RunOutcome outcome = stages == 1 ? run_training(job, backend, data, data_parallel(), progress, metrics, &control,
                                                    rescue)
                                     : train_pipeline_stage(job, data, backend, engine, grid, **dp, mailbox, progress,
                                                            metrics, control, rescue);
    return {-1, outcome.exit_code, outcome.reason};
  } catch (const actors::WorkStopped&) {
    throw;
  } catch (const std::exception& e) {
    return {-1, 1, "rank " + std::to_string(rank) + ": " + e.what()};
  }
}

}  // namespace

int run_node(const NodeArgs& args, const ResolvedJob& job) {
  const int first_rank = env_int("RANK", 0);
  const int world = env_int("WORLD_SIZE", 1);
  const int slots = env_int("TROUPE_SLOTS", 1);
  auto fail = [](const std::string& message, int code) {
    std::fprintf(stderr, "troupe: error: %s\n", message.c_str());
    return code;
  };
  if (slots < 1 || first_rank < 0 || first_rank + slots > world)
    return fail("TROUPE_SLOTS " + std::to_string(slots) + " with RANK " + std::to_string(first_rank) +
                    " does not fit WORLD_SIZE " + std::to_string(world),
                2);
  auto recovery = RecoveryCounts::from_environment();
  if (!recovery) return fail(recovery.error().message, 2);
  // `troupe drill node-lost`: node TROUPE_DRILL_NODE_GONE fails at every restart, as a machine
  // that does not come back would.
  if (recovery->restarts > 0 && env_int("TROUPE_DRILL_NODE_GONE", -1) == args.node_index)
    return fail("drill: node " + std::to_string(args.node_index) + " cannot come back", 1);
  const auto colon = args.join.rfind(':');
  if (colon == std::string::npos) return fail("--join '" + args.join + "' is not HOST:PORT", 2);
  const std::string host = args.join.substr(0, colon);
  const int port = std::atoi(args.join.c_str() + colon + 1);
  const monitor::MetricsIdentity identity{metrics_job_label(args.token), std::max(args.node_index, 0)};
  const ProcessLogs logs(job.config, identity.job, identity.node, first_rank, "node");
  auto metrics = ProcessMetrics::serve(job.config.monitor, identity, first_rank, slots, "worker");
  if (!metrics) return fail(metrics.error().message, 2);

  // train.threads 0 means all cores; the workers of every node process on one machine share them.
  const int local_workers = std::max(1, env_int("LOCAL_WORLD_SIZE", 1));
  const int threads = job.config.train.threads > 0
                          ? job.config.train.threads
                          : std::max(1, static_cast<int>(std::thread::hardware_concurrency()) / local_workers);
  auto data = load_job_data(job);
  if (!data) return fail(data.error().message, 2);
  if (Status opened = logs.open_file(); !opened) return fail(opened.error().message, 2);
  // Each slot is a rank with its own backend (scratch buffers are not shared between threads)
  // and its own engine (UCX worker and progress thread: a rank's tag space is its own).
  std::vector<std::unique_ptr<compute::Backend>> backends;
  std::vector<std::unique_ptr<comm::Engine>> engines;
  const int local_rank_base = env_int("LOCAL_RANK", 0);
  const bool on_device = is_device_backend(job.config.train.backend);
  for (int slot = 0; slot < slots; ++slot) {
    if (on_device) {
      // The backend's stream and cuBLAS handle belong to the device current when it is made.
      if (Status s = use_rank_device(local_rank_base + slot); !s) return fail(s.error().message, 2);
    }
    auto backend = compute::make_backend(job.config.train.backend, threads);
    if (!backend) return fail(backend.error().message, 2);
    backends.push_back(std::move(*backend));
    auto engine = comm::Engine::create(first_rank + slot, world);
    if (!engine) return fail(engine.error().message, 1);
    engines.push_back(std::move(*engine));
    if (monitor::WorkerMetrics* worker = metrics->worker(slot))
      worker->read_comm_from([traffic = engines.back()->traffic()] { return comm_reading(*traffic); });
  }
  metrics->set_mfu_basis(job, world);
  // The job process counts failures, recoveries and restarts (TROUPE_RESTARTS); a restarted node
  // process starts its counters there, so every node's /metrics shows the job's history.
  if (monitor::NodeMetrics* node = metrics->node()) {
    node->count_restarts(recovery->restarts);
    for (const auto& [kind, count] : recovery->failures) node->count_failure(kind, count);
    for (const auto& [source, count] : recovery->recoveries) node->count_recovery(source, count);
  }

  NodeControl control(first_rank, slots);  // outlives the workers, which obey it
  actors::TroupeConfig cfg;
  caf::actor_system system{cfg};
  auto supervisor = system.middleman().remote_actor(host, static_cast<std::uint16_t>(port));
  if (!supervisor) return fail("cannot reach the job at " + args.join + ": " + to_string(supervisor.error()), 1);

  actors::join_msg hello;
  hello.token = args.token;
  hello.build_id = build_id();
  hello.config_hash = config_hash(job.config);
  hello.node_index = args.node_index;
  hello.host = launch::this_host_name();
  hello.pid = static_cast<int>(::getpid());
  for (const auto& engine : engines) hello.comm_addresses.push_back(actors::byte_blob{engine->address()});
  if (on_device) {
    const int stages = job.config.pipeline.stages;
    auto ids = lead_device_groups(comm::Grid{world / stages, stages, 1}, first_rank, slots);
    if (!ids) return fail(ids.error().message, 1);
    hello.device_group_ids = std::move(*ids);
  }
  actors::NodeWork work = [&](const actors::start_msg& start, int slot, caf::blocking_actor* worker,
                              monitor::WorkProgress& progress) {
    const auto index = static_cast<std::size_t>(slot);
    return train_as_rank(job, *data, *backends[index], *engines[index], local_rank_base + slot, start, worker,
                         progress, metrics->worker(slot), control.slot(slot));
  };
  actors::NodeOptions options;
  options.heartbeat_interval = std::chrono::milliseconds(std::lround(job.config.fault.heartbeat_seconds * 1000));
  options.oldest_receive = [&engines](int slot) {
    auto wait = engines[static_cast<std::size_t>(slot)]->oldest_pending_receive();
    return wait ? comm::describe(*wait, std::chrono::steady_clock::now()) : std::string{};
  };
  if (monitor::NodeMetrics* node = metrics->node()) options.heartbeat_sent = [node] { node->heartbeat_sent(); };
  options.control = [&control](const actors::control_msg& order) { return control.obey(order); };
  caf::scoped_actor self{system};
  actors::spawn_node_supervisor(system, *supervisor, std::move(hello), work, std::move(options), self);
  int code = 1;
  self->receive([&](actors::done_atom, const actors::job_outcome_msg& outcome) {
    if (outcome.exit_code != 0) std::fprintf(stderr, "troupe: node %d: %s\n", args.node_index, outcome.reason.c_str());
    code = outcome.exit_code;
  });
  // A worker held or paused at a step boundary would keep the actor system from shutting down.
  control.stop_all();
  return code;
}

}  // namespace troupe::apps
