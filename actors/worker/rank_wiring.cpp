// A rank's wiring once the job starts (rank_wiring.hpp): connect to its groups' partners, build the
// data-parallel and pipeline groups over the grid, and train as a replica or as a pipeline stage.

#include "actors/worker/rank_wiring.hpp"

#include <spdlog/fmt/fmt.h>

#include <algorithm>

#include "actors/process_environment.hpp"
#include "actors/supervision/recovery_path.hpp"
#include "actors/worker/data_parallel_hooks.hpp"
#include "actors/worker/device_groups.hpp"
#include "actors/worker/in_place_recovery.hpp"
#include "actors/worker/island_membership.hpp"
#include "actors/worker/mailbox_comm.hpp"
#include "actors/worker/mailbox_context_exchange.hpp"
#include "actors/worker/node_rescue.hpp"
#include "actors/worker/outer_syncs.hpp"
#include "actors/worker/pipeline_trainer.hpp"
#include "actors/worker/trace_gather.hpp"
#include "actors/worker/training_run.hpp"
#include "comm/collectives.hpp"
#include "comm/grid.hpp"
#include "comm/peer_transports.hpp"
#include "compute/memory_ledger.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/model/parameter_layout.hpp"
#include "compute/model/stage_split.hpp"
#include "monitor/log.hpp"
#include "monitor/trace.hpp"
#include "schedules/checker.hpp"
#include "schedules/generate.hpp"

namespace troupe::actors {
namespace {

// The job's comm.* keys as the compressor takes them.
comm::CompressionOptions compression_options(const ResolvedJob& job) {
  return {job.config.comm.compress, job.config.comm.powersgd_rank, job.config.comm.compress_start_step,
          job.config.train.seed};
}

// What `compressor` has done so far, as metrics and progress records take it.
std::function<monitor::CompressionReading()> reading_of(std::shared_ptr<comm::GradientCompressor> compressor) {
  return [compressor] {
    const comm::CompressionTotals& totals = compressor->totals();
    return monitor::CompressionReading{totals.wire_bytes.load(), totals.plain_bytes.load(),
                                       static_cast<double>(totals.nanoseconds.load()) * 1e-9};
  };
}

// What the dense sums' compressor and the experts' (where the rank sums experts) have done together.
std::function<monitor::CompressionReading()> reading_of(std::shared_ptr<comm::GradientCompressor> dense,
                                                        std::shared_ptr<comm::GradientCompressor> experts) {
  if (!experts) return reading_of(std::move(dense));
  return [dense_reading = reading_of(std::move(dense)), expert_reading = reading_of(std::move(experts))] {
    const monitor::CompressionReading a = dense_reading(), b = expert_reading();
    return monitor::CompressionReading{a.wire_bytes + b.wire_bytes, a.plain_bytes + b.plain_bytes,
                                       a.seconds + b.seconds};
  };
}

// The hooks a rank's run takes part in in-place recoveries with: survive always, join when the rank
// replaces a failed one. Only where the job recovers in place (recovery_path.hpp: on the CPU):
// elsewhere a recovery order never comes.
RecoveryHooks in_place_hooks(InPlaceRecovery& recovery, MailboxComm& mailbox,
                             const std::optional<recover_msg>& replacing) {
  RecoveryHooks hooks;
  hooks.take_waiting_orders = [&mailbox] { mailbox.take_waiting_orders(); };
  hooks.holds_steps = [&mailbox](std::int64_t steps) { mailbox.holds_steps(steps); };
  hooks.survive = [&recovery](const recover_msg& order, std::int64_t steps_done, TrainingLoop& loop,
                              const CheckpointRollback& rollback) {
    return recovery.survive(order, steps_done, loop, rollback);
  };
  if (replacing)
    hooks.join = [&recovery, &replacing](TrainingLoop& loop, const CheckpointRollback& rollback) {
      return recovery.join(*replacing, loop, rollback);
    };
  return hooks;
}

// A group of the grid as a replacement joins it: under the recovery's epoch id, so that it meets
// the survivors' renewed group.
comm::Group renewed(comm::Group group, std::uint16_t axis_id, const std::optional<recover_msg>& replacing) {
  if (replacing) group.id = comm::epoch_group_id(axis_id, replacing->epoch);
  return group;
}

// The outer state as a stage's checkpoints hold it, laid out as the rank's parameters.
std::vector<PipelineTrainer::LikeParameters> outer_state(OuterSyncs* outer) {
  if (!outer) return {};
  return {{"outer_sync", outer->outer().last_sync().data_as<float>()},
          {"outer_momentum", outer->outer().momentum().data_as<float>()}};
}

// The buffer DiLoCo's outer step works on for a pipeline rank: its one chunk's parameters, or for
// a rank of several chunks (interleaved, ZB-V) a buffer of its own that they are copied into and
// out of around each sync.
compute::Tensor outer_buffer(PipelineTrainer& trainer) {
  if (trainer.chunk_count() == 1) return trainer.chunk_parameters();
  compute::MemoryScope scope(compute::MemoryKind::optimizer_state);
  compute::Tensor flat = compute::Tensor::zeros({trainer.parameter_count()}, compute::DType::f32);
  trainer.gather_parameters(flat);
  return flat;
}

// The model's outer fragments as a stage's buffer holds them (outer_buffer: one chunk's kept
// parameters, or several chunks' one after another). Each chunk (of tensor shard `shard` of
// `shards`) keeps its part of each fragment as one run, its units in the model's order, and a chunk
// ending the model that does not start it its copy of the tied embedding on fragment 0's schedule;
// under ZeRO-3 its shard keeps the part of each inside it. Several chunks give a fragment one run
// in each. Plain DiLoCo over several chunks: the whole buffer, one fragment (empty).
std::vector<compute::OuterFragment> chunk_fragments(const ResolvedJob& job, PipelineTrainer& trainer, int shard,
                                                    int shards) {
  const TrainOptions& t = job.config.train;
  if (trainer.chunk_count() > 1 && t.diloco_fragments == 1) return {};
  std::vector<compute::OuterFragment> runs;
  std::int64_t at = 0;  // the chunk's first element in the rank's buffer
  for (int c = 0; c < trainer.chunk_count(); ++c) {
    compute::GPTStage& stage = trainer.chunk_stage(c);
    const int first = stage.first_layer(), last = stage.last_layer();
    const bool tied_copy = first > 0 && last == job.model.n_layer;
    const std::int64_t kept = stage.kept_begin(), held = stage.params().numel();
    for (compute::OuterFragment run : compute::fragments_within(
             compute::stage_fragments(
                 compute::GPTStage::parameter_units(job.model, first, last, {shard, shards}), first, last,
                 job.model.n_layer,
                 tied_copy ? std::int64_t{job.model.padded_vocab_size} * job.model.n_embd / shards : 0,
                 t.diloco_fragments, t.diloco_steps),
             kept, kept + held)) {
      run.begin += at;
      run.end += at;
      runs.push_back(run);
    }
    at += held;
  }
  return runs;
}

// A pipeline stage as the rank loop drives it; each step also reports the stage's bubble. Under
// train.sync diloco (`outer`, on `outer_buffer`) the stage's shard takes the outer step after its
// steps.
class PipelineStageLoop final : public TrainingLoop {
 public:
  PipelineStageLoop(PipelineTrainer& trainer, monitor::WorkerMetrics* metrics, std::string layout,
                    CheckpointPlace place, std::unique_ptr<OuterSyncs> outer, compute::Tensor outer_buffer)
      : trainer_(trainer),
        metrics_(metrics),
        layout_(std::move(layout)),
        place_(place),
        outer_(std::move(outer)),
        outer_buffer_(std::move(outer_buffer)),
        held_(trainer.held_state(outer_state(outer_.get()))) {}

  compute::StepResult step() override {
    compute::StepResult result = trainer_.step();
    if (outer_) take_outer_step(result);
    if (metrics_) {
      metrics_->set_bubble_fraction(trainer_.bubble_fraction());
      metrics_->set_batch_share(result.batch_share);
      if (result.micro_batch_seconds > 0) metrics_->set_micro_batch_seconds(result.micro_batch_seconds);
    }
    if (result.shares_changed && place_.rank == 0)
      log_share_change(result, trainer_.micro_shares(), trainer_.seconds_per_micro_batch());
    return result;
  }
  double evaluate(int batches) override { return trainer_.evaluate(batches); }
  double param_norm() override { return trainer_.param_norm(); }
  std::int64_t tokens_per_step() const override { return trainer_.tokens_per_step(); }
  std::string layout() const override { return layout_; }
  const std::vector<checkpoint::HeldRange>& held() const override { return held_; }
  CheckpointPlace checkpoint_place() const override { return place_; }
  void resume_at(long steps) override { trainer_.resume_at(steps); }
  void abandon_step() override { trainer_.abandon_step(); }

 private:
  void take_outer_step(compute::StepResult& result) {
    const long steps = trainer_.steps_taken();
    const bool copied = trainer_.chunk_count() > 1 && outer_->due(steps);
    if (copied) trainer_.gather_parameters(outer_buffer_);
    outer_->after_step(steps, outer_buffer_, result);
    if (copied) trainer_.scatter_parameters(outer_buffer_);
  }

  PipelineTrainer& trainer_;
  monitor::WorkerMetrics* metrics_;
  std::string layout_;
  CheckpointPlace place_;
  std::unique_ptr<OuterSyncs> outer_;  // train.sync diloco only
  compute::Tensor outer_buffer_;       // ... and the parameters it syncs (outer_buffer above)
  std::vector<checkpoint::HeldRange> held_;
};

// The schedule a pipeline rank follows: the job's over its replica's micro-batches
// (pipeline.microbatches, or under train.balance static its share of the step's), or without a
// pipeline (tensor shards alone) one stage running them one after another (train.grad_accum, or
// its share).
Expected<schedules::Schedule> stage_schedule(const ResolvedJob& job, const std::vector<int>& shares, int replica) {
  const PipelineOptions& p = job.config.pipeline;
  const int even = p.stages == 1 ? job.config.train.grad_accum : p.microbatches;
  const int micro_batches = shares.empty() ? even : shares[static_cast<std::size_t>(replica)];
  auto schedule = p.stages == 1 ? schedules::generate_schedule(schedules::ScheduleKind::gpipe, 1, micro_batches, 1)
                                : schedules::generate_schedule(p.schedule, p.stages, micro_batches, p.virtual_stages);
  if (!schedule && !shares.empty())
    return Error{fmt::format("train.balance {}: replica {}'s share of {} micro-batches: {}",
                             compute::balance_mode_name(job.config.train.balance), replica, micro_batches,
                             schedule.error().message)};
  return schedule;
}

// This rank's stage of a pipeline (grid.pp > 1), or its tensor shard of a stage (grid.tp > 1), as
// the job's schedule has it; under DiLoCo in `island` (its dp group, `dp`, is the island's), and
// where the job leaves lost islands out in `membership`'s outer group.
RunOutcome train_pipeline_stage(const ResolvedJob& job, const JobData& data, compute::Backend& backend,
                                comm::Engine& engine, const comm::Grid& grid, comm::Communicator& dp,
                                MailboxComm& mailbox, monitor::WorkProgress& progress, monitor::WorkerMetrics* metrics,
                                monitor::StepControl& control, const RescueHooks& rescue,
                                const std::optional<recover_msg>& replacing, const compute::ContextShardGroup& context,
                                const compute::ExpertGroup& experts, comm::Communicator* expert_data,
                                const std::function<void(int epoch)>& renew_context, compute::IslandGroup island,
                                IslandMembership* membership, const std::function<void()>& restored) {
  const PipelineOptions& p = job.config.pipeline;
  const int rank = engine.rank();
  const comm::GridCoord coord = comm::grid_coord(grid, rank);
  // The grid's dp axis holds every context shard of each data replica. Under train.balance each
  // island splits its step over its own replicas.
  const int context_shards = context.sharded() ? context.split.shards : 1;
  const int replicas = grid.dp / context_shards, data_replica = coord.dp / context_shards;
  const int islands = island.count, island_replicas = replicas / islands;
  const std::vector<int> shares = micro_shares(job, island_replicas, data_replica / island_replicas);
  auto schedule = stage_schedule(job, shares, data_replica % island_replicas);
  if (!schedule) return {2, schedule.error().message};
  auto report = schedules::check_schedule(*schedule);
  TROUPE_CHECK(report.ok(), report ? "" : report.error().message);
  auto pp = comm::Communicator::create(engine, renewed(comm::pp_group(grid, rank), comm::pp_group_id, replacing));
  if (!pp) return {1, pp.error().message};
  std::unique_ptr<comm::Communicator> embedding, tp;
  if (grid.tp > 1) {
    auto created =
        comm::Communicator::create(engine, renewed(comm::tp_group(grid, rank), comm::tp_group_id, replacing));
    if (!created) return {1, created.error().message};
    tp = std::move(*created);
  }
  if (in_embedding_group(*schedule, coord.pp)) {
    auto created = comm::Communicator::create(
        engine, renewed(comm::embedding_group(grid, rank), comm::embedding_group_id, replacing));
    if (!created) return {1, created.error().message};
    embedding = std::move(*created);
  }
  if (rank == 0 && grid.pp > 1) {
    std::string text;
    for (std::size_t vs = 0; vs < job.pipeline_split.size(); ++vs) {
      const compute::StageLayers& l = job.pipeline_split[vs];
      text += fmt::format("{}stage {}{}: blocks {}-{} ({:.2f}M parameters)", vs ? "; " : "",
                          schedule->stage_of(static_cast<int>(vs)),
                          p.virtual_stages > 1 ? fmt::format(" chunk {}", schedule->chunk_of(static_cast<int>(vs))) : "",
                          l.first_layer, l.last_layer - 1, l.params / 1e6);
    }
    monitor::logger("train")->info(
        "pipeline split by {}: {}",
        p.split == compute::SplitMethod::balanced ? "parameters" : "stage speeds " + p.stage_speeds, text);
  }
  const compute::ZeroStage zero = job.config.train.zero;
  PipelineSetup setup{job.model,           *schedule, job.pipeline_split,
                      report->peak_stashed[static_cast<std::size_t>(coord.pp)], grid, rank, trainer_options(job),
                      zero,                job.config.train.zero3_reshard, job.config.tensor.sequence_parallel,
                      compression_options(job)};
  setup.options.micro_shares = shares;
  setup.options.islands = island.count;
  setup.options.island = island.index;
  if (job.config.train.balance == compute::BalanceMode::dynamic)
    setup.options.balance_window = job.config.train.balance_window;
  setup.parameters_from_peer = replacing.has_value();
  setup.outer_state = job.config.train.sync == compute::SyncMode::diloco;
  setup.context = context;
  setup.experts = experts;
  compute::memory_ledger().measure_runtime();  // what the process holds before the model
  PipelineTrainer trainer(std::move(setup), backend, {engine, dp, **pp, embedding.get(), tp.get(), expert_data},
                          mailbox, progress, data.train, data.val);
  std::function<monitor::CompressionReading()> compression;
  if (trainer.compressor()) {
    compression = reading_of(trainer.compressor(), trainer.expert_compressor());
    if (metrics) metrics->read_compression_from(compression);
  }
  // PowerSGD's residuals are every replica's own: each writes, and the commit waits for all.
  const bool replicas_write =
      trainer.compressor() && trainer.compressor()->options().kind == comm::Compression::powersgd;
  std::string shards = grid.tp > 1 ? fmt::format(" x {} tensor shards", grid.tp) : "";
  if (context.sharded())
    shards += fmt::format(" x {} context shards ({})", context.split.shards,
                          compute::context::context_method_name(context.method));
  if (experts.sharded())
    shards +=
        fmt::format(" x {} expert shards of {} experts each", experts.shards(), job.model.experts / experts.shards());
  std::string shares_text;  // train.balance static's
  if (!shares.empty()) shares_text = ", " + announce_shares(job, shares, rank);
  std::unique_ptr<OuterSyncs> outer;
  compute::Tensor synced;
  if (job.config.train.sync == compute::SyncMode::diloco) {
    synced = outer_buffer(trainer);
    outer = std::make_unique<OuterSyncs>(job, synced, chunk_fragments(job, trainer, coord.tp, grid.tp),
                                         std::move(island), rank, metrics);
    shares_text += outer->describe(island_replicas);
  }
  monitor::TraceRecorder trace;
  if (!p.trace.empty()) {
    trainer.record_into(trace);
    if (outer)
      outer->record_into(trace, trainer.side_track(),
                         fmt::format("stage {}{} outer syncs (rank {})", coord.pp,
                                     grid.tp > 1 ? fmt::format(", tensor shard {}", coord.tp) : "", rank));
  }
  PipelineStageLoop loop(
      trainer, metrics,
      p.stages == 1
          ? fmt::format("{} rank(s){} x batch {} x seq {} x accum {}{}", replicas, shards, job.config.train.batch_size,
                        job.config.train.seq_len, job.config.train.grad_accum, shares_text)
          : fmt::format("{} x {} pipeline{}, {} micro-batches of {} x seq {}; stage {} holds {} "
                        "activations at most{}",
                        replicas, schedules::to_string(p.schedule), shards, schedule->microbatches,
                        job.config.train.batch_size, job.config.train.seq_len, coord.pp,
                        report->peak_stashed[static_cast<std::size_t>(coord.pp)], shares_text),
      {rank,
       {grid.dp, grid.pp, grid.tp},
       // Under expert shards the first expert group's ranks write their experts; under DiLoCo island 0's.
       (compute::shards_optimizer_state(zero) || replicas_write ? grid.dp / islands
        : experts.sharded()                                     ? experts.shards()
                                                                : 1) *
           grid.pp * grid.tp},
      std::move(outer), synced);
  // In place, the rank of the same stage and shard in a surviving replica gives the stage's state.
  std::vector<RenewedGroup> groups{{&dp, comm::dp_group_id}, {pp->get(), comm::pp_group_id}};
  if (tp) groups.push_back({tp.get(), comm::tp_group_id});
  if (embedding) groups.push_back({embedding.get(), comm::embedding_group_id});
  if (expert_data) groups.push_back({expert_data, comm::outer_group_id});
  InPlaceRecovery recovery(mailbox.worker(), mailbox, engine, std::move(groups), [&](int epoch) {
    trainer.renew(epoch);
    renew_context(epoch);
  });
  RecoveryHooks recovery_hooks = in_place_hooks(recovery, mailbox, replacing);
  TROUPE_CHECK(!replacing || recovery_hooks.join, "a replacement joins only where in-place recovery applies");
  if (membership) {
    // The island is its stages' and tensor shards' ranks too: they agree on each sum over all its
    // groups, and a lost island's new rank takes the outer state as a whole model's does.
    membership->agree_over({&dp, tp.get(), pp->get()});
    if (replacing && !replacing->islands_kept.empty())
      recovery_hooks.join = [membership, &replacing](TrainingLoop& loop, const CheckpointRollback&) {
        return membership->rejoin(*replacing, loop);
      };
  }
  RunOutcome outcome =
      drive_training(job, data, backend.name(), loop,
                     {progress, metrics, &control, rescue, rank == 0, compression, recovery_hooks, nullptr, restored});
  const std::vector<int> peaks = trainer.peak_stashed_measured();
  if (rank == 0)
    monitor::logger("train")->info("activations held at most, by stage: {} (the schedule checker's bound: {})",
                                   fmt::join(peaks, " "), fmt::join(report->peak_stashed, " "));
  if (!p.trace.empty() && outcome.exit_code == 0) {
    auto world = comm::Communicator::create(engine, comm::world_group(grid));
    if (!world) return {1, world.error().message};
    if (Status s = gather_trace(mailbox, **world, trace); !s) return {1, "trace: " + s.error().message};
    if (rank == 0) {
      if (Status s = monitor::write_trace(trace, p.trace); !s) return {1, s.error().message};
      monitor::logger("train")->info(
          "trace of every stage's ops{} written to {} (Chrome trace JSON; Perfetto opens it)",
          job.config.train.sync == compute::SyncMode::diloco ? " and outer syncs" : "", p.trace);
    }
  }
  return outcome;
}

}  // namespace

node_done_msg train_as_rank(const ResolvedJob& job, const JobData& data, compute::Backend& backend,
                                    comm::Engine& engine, int local_rank, const start_msg& start,
                                    caf::blocking_actor* worker, monitor::WorkProgress& progress,
                                    monitor::WorkerMetrics* metrics, monitor::StepControl& control,
                                    const std::optional<recover_msg>& replacing) {
  const RescueHooks rescue = node_rescue_hooks(worker, engine.rank(), rescue_timing(job.config.fault));
  const int rank = engine.rank();
  const bool on_device = compute::on_device(job.config.train.backend);
  if (on_device) {
    if (Status s = use_rank_device(local_rank); !s) return {-1, 2, "rank " + std::to_string(rank) + ": " + s.error().message};
  }
  const int stages = job.config.pipeline.stages, shards = job.config.tensor.shards;
  if (start.world_size % (stages * shards) != 0)
    return {-1, 2,
            fmt::format("pipeline.stages {} × tensor.shards {} does not divide the {} workers", stages, shards,
                        start.world_size)};
  const comm::Grid grid{start.world_size / (stages * shards), stages, shards};
  // The peers this rank's groups exchange with are connected now, their regions mapped for the
  // rings; every other rank is introduced and connected on first use (a recovery's state, a trace
  // gather), so a rank makes 2 log2 N handshakes at most a group, not N − 1. A worker respawned in
  // its own process keeps its engine's endpoints (a replacement in a new node process connects).
  // The partners' handshakes are in flight together (Engine::connect of many).
  const std::vector<int> partners = comm::grid_partners(grid, rank);
  std::vector<comm::Engine::PeerAddress> now;
  for (const auto& node : start.nodes) {
    for (int slot = 0; slot < node.slots; ++slot) {
      const int peer = node.first_rank + slot;
      if (peer == rank) continue;
      const std::vector<std::uint8_t>& address = node.comm_addresses.at(static_cast<std::size_t>(slot)).bytes;
      if (std::binary_search(partners.begin(), partners.end(), peer) && !(replacing && engine.connected(peer)))
        now.push_back({peer, address});
      else if (Status s = engine.introduce(peer, address); !s)
        return {-1, 1, "cannot connect to rank " + std::to_string(peer) + ": " + s.error().message};
    }
  }
  if (Status s = engine.connect(now); !s)
    return {-1, 1, "rank " + std::to_string(rank) + " cannot connect to its partners: " + s.error().message};
  // One line says how each partner's data travels.
  if (!partners.empty())
    monitor::rank_detail_logger("comm")->info("{}", comm::describe_peer_transports(engine, partners));
  // Under DiLoCo a rank's gradients are summed over its island, and its pseudo-gradients over the
  // ranks at its place in every island (comm/grid.hpp).
  const int islands = job.config.train.islands;
  auto dp = comm::Communicator::create(
      engine, renewed(islands > 1 ? comm::island_group(grid, rank, islands) : comm::dp_group(grid, rank),
                      comm::dp_group_id, replacing));
  if (!dp) return {-1, 1, dp.error().message};
  // Under expert shards a rank's experts' gradients are summed over the ranks at its place in every
  // expert group, which hold the same experts (none to sum with one expert group).
  const int expert_shards = job.config.expert.shards;
  std::unique_ptr<comm::Communicator> expert_data;
  if (expert_shards > 1 && grid.dp > expert_shards) {
    auto created = comm::Communicator::create(
        engine, renewed(comm::expert_data_group(grid, rank, expert_shards), comm::outer_group_id, replacing));
    if (!created) return {-1, 1, created.error().message};
    expert_data = std::move(*created);
  }
  // A lost island's new rank joins the outer group as renewed for its rejoin (island_membership.hpp).
  std::unique_ptr<comm::Communicator> outer;
  if (islands > 1) {
    auto created = comm::Communicator::create(
        engine, renewed(comm::outer_group(grid, rank, islands), comm::outer_group_id, replacing));
    if (!created) return {-1, 1, created.error().message};
    outer = std::move(*created);
  }
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
    MailboxComm mailbox(worker);
    const compute::ParameterLayout layout(job.model);
    std::shared_ptr<comm::GradientCompressor> compressor, expert_compressor;
    std::function<monitor::CompressionReading()> compression_reading;
    if (const comm::CompressionOptions compression = compression_options(job);
        compression.kind != comm::Compression::none)
    {
      // Under expert shards the rank's buffer is its local layout: its dense tensors compressed over
      // the data-parallel group, its experts' over the ranks holding them.
      const compute::ParameterLayout local(job.model, {(**dp).position() % expert_shards, expert_shards});
      std::vector<compute::ParameterView> dense, experts;
      for (const compute::ParameterView& view : local.views()) (view.expert ? experts : dense).push_back(view);
      compressor = gradient_compressor(mailbox, **dp, progress, compression,
                                       gradient_tensors(expert_shards > 1 ? dense : local.views()));
      // With one expert group no rank sums its experts; PowerSGD's state of them stays as drawn (Q)
      // and zero (residuals), kept for the checkpoints' whole-model kinds.
      if (expert_data || (expert_shards > 1 && compression.kind == comm::Compression::powersgd))
        expert_compressor = gradient_compressor(mailbox, expert_data ? *expert_data : **dp, progress, compression,
                                                gradient_tensors(experts));
      compression_reading = reading_of(compressor, expert_data ? expert_compressor : nullptr);
      if (metrics) metrics->read_compression_from(compression_reading);
      if (rank == 0)
        monitor::logger("comm")->info("gradients summed as {}{} from step {} (plain before)",
                                      comm::compression_name(compression.kind),
                                      compression.kind == comm::Compression::powersgd
                                          ? fmt::format(" (rank {}, error feedback)", compression.rank)
                                          : "",
                                      compression.start_step + 1);
    }
    auto data_parallel = [&] {
      compute::DataParallel host =
          group_data_parallel(mailbox, **dp, progress, job.config.train.zero, layout.total(), compressor);
      if (expert_data) sum_experts_over(host, mailbox, *expert_data, progress, expert_compressor);
      if (expert_compressor && expert_compressor->options().kind == comm::Compression::powersgd) {
        host.sum_state.push_back({"powersgd_q", expert_compressor->factors(), true, true});
        host.sum_state.push_back(
            {"powersgd_residual_dp" + std::to_string(host.rank), expert_compressor->residuals(), false, true});
      }
      return device_group ? device_group->data_parallel(std::move(host), mailbox, progress) : host;
    };
    // Context shards are consecutive places of the dp axis (at each stage and tensor shard): the
    // data-parallel sum over all of them is also the sum over each context group
    // (compute/train/trainer.hpp).
    const int context_shards = job.config.context.shards;
    std::optional<MailboxContextExchange> context_exchange;
    compute::ContextShardGroup context;
    if (context_shards > 1) {
      context_exchange.emplace(mailbox, engine, comm::context_group(grid, rank, context_shards));
      context = {job.config.context.method,
                 compute::context::make_context_split(job.config.train.seq_len, context_shards).value(),
                 &*context_exchange};
    }
    // Expert groups, like context groups, are consecutive places of the dp axis (the two never meet
    // in one job, so they share the group id): each MoE block's experts split over the group's
    // ranks, and each rank holds only its experts' parameters, gradients and moments (docs/moe.md).
    std::optional<MailboxContextExchange> expert_exchange;
    if (expert_shards > 1)
      expert_exchange.emplace(mailbox, engine, comm::expert_group(grid, rank, expert_shards),
                              comm::ExchangeGroup::expert);
    const compute::ExpertGroup experts{expert_exchange ? &*expert_exchange : nullptr};
    // pipeline.trace of a job without stages or tensor shards: every context shard's exchanges, or
    // under DiLoCo every rank's steps and outer syncs (context shards' exchanges left out: their
    // tracks are per replica, DiLoCo's per rank), gathered over the data-parallel group (every rank;
    // under DiLoCo the island, then the islands' first ranks over their outer group) into rank 0's
    // file. With stages or shards the pipeline's trace is written instead, the outer syncs on
    // tracks of their own.
    const bool data_parallel_only = stages == 1 && shards == 1;
    const bool diloco = job.config.train.sync == compute::SyncMode::diloco;
    const std::string trace_path =
        data_parallel_only && (context_exchange || diloco) ? job.config.pipeline.trace : std::string();
    monitor::TraceRecorder trace;
    if (context_exchange && !trace_path.empty() && !diloco) context_exchange->record_into(trace);
    // An in-place recovery renews the context or expert group with the rank's other groups.
    const auto renew_context = [&context_exchange, &expert_exchange](int epoch) {
      if (context_exchange) context_exchange->renew(epoch);
      if (expert_exchange) expert_exchange->renew(epoch);
    };
    // In place, a surviving replica gives the whole state, or every rank rolls back (recovery_path.hpp);
    // every rank of a data-parallel group holds the same parameters, a context shard's included.
    std::vector<RenewedGroup> summing = {{dp->get(), comm::dp_group_id}};
    if (expert_data) summing.push_back({expert_data.get(), comm::outer_group_id});
    InPlaceRecovery recovery(worker, mailbox, engine, summing, renew_context);
    RecoveryHooks recovery_hooks;
    if (!device_group) recovery_hooks = in_place_hooks(recovery, mailbox, replacing);
    // DiLoCo: the outer group as islands are left out and rejoin, where the job does that.
    std::optional<IslandMembership> membership;
    if (outer) {
      const bool leaves_out = choose_recovery(start.recovery, FailureKind::node_lost).island_left_out;
      auto kill = env::read_drill_kill_at();
      if (!kill) return {-1, 2, kill.error().message};
      const long kill_in_sync = *kill && (*kill)->in_sync && (*kill)->rank == rank && !replacing ? (*kill)->step : -1;
      membership.emplace(mailbox, engine, progress, grid, islands, job.config.train.diloco_precision, std::move(outer),
                         leaves_out, kill_in_sync);
      // An island of several ranks agrees on each sum over its groups (island_membership.hpp); a
      // pipeline stage's or tensor shard's adds its other groups (train_pipeline_stage).
      if (leaves_out) membership->agree_over({dp->get()});
      if (replacing && !replacing->islands_kept.empty())
        recovery_hooks.join = [&membership, &replacing](TrainingLoop& loop, const CheckpointRollback&) {
          return membership->rejoin(*replacing, loop);
        };
    }
    monitor::TraceRecorder* const steps_trace = diloco && !trace_path.empty() ? &trace : nullptr;
    // DiLoCo's islands: every rank's restore before any rank's first step (RunServices::restored),
    // over every rank of the job.
    std::unique_ptr<comm::Communicator> world;
    std::function<void()> restored;
    if (islands > 1 && !replacing) {
      auto created = comm::Communicator::create(engine, comm::world_group(grid));
      if (!created) return {-1, 1, created.error().message};
      world = std::move(*created);
      restored = [&mailbox, &progress, &world] {
        compute::Tensor ready = compute::Tensor::zeros({1}, compute::DType::f32);
        auto waiting = progress.wait_for("every rank's restore before the first step");
        check_comm(mailbox.wait(mailbox.all_reduce(*world, ready)));
      };
    }
    const RunServices services{progress,       metrics,     &control, rescue, rank == 0, compression_reading,
                               recovery_hooks, steps_trace, restored};
    compute::IslandGroup island;
    if (membership) island = membership->group();
    RunOutcome outcome =
        data_parallel_only
            ? run_training(job, backend, data, data_parallel(), services, context, std::move(island), experts)
            : train_pipeline_stage(job, data, backend, engine, grid, **dp, mailbox, progress, metrics, control, rescue,
                                   replacing, context, experts, expert_data.get(), renew_context, std::move(island),
                                   membership ? &*membership : nullptr, restored);
    if (!trace_path.empty() && outcome.exit_code == 0) {
      if (Status s = gather_trace(mailbox, **dp, trace); !s) return {-1, 1, "trace: " + s.error().message};
      if (membership && (*dp)->position() == 0)
        if (Status s = gather_trace(mailbox, membership->communicator(), trace); !s)
          return {-1, 1, "trace: " + s.error().message};
      if (rank == 0) {
        if (Status s = monitor::write_trace(trace, trace_path); !s) return {-1, 1, s.error().message};
        monitor::logger("train")->info(
            "trace of every {} written to {} (Chrome trace JSON; Perfetto opens it)",
            diloco ? "rank's steps and outer syncs" : "context shard's ring shifts and all-to-alls", trace_path);
      }
    }
    return {-1, outcome.exit_code, outcome.reason};
  } catch (const WorkStopped&) {
    throw;
  } catch (const CommFailed& e) {
    return {-1, 1, "rank " + std::to_string(rank) + ": " + e.what()};
  } catch (const std::exception& e) {
    return {-1, 1, "rank " + std::to_string(rank) + ": " + e.what(), true};
  }
}

}  // namespace troupe::actors
