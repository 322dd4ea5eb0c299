#include "actors/worker/pipeline_trainer.hpp"


#include <algorithm>
#include <chrono>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <string>

#include "actors/worker/data_parallel_hooks.hpp"
#include "actors/worker/pipeline_slots.hpp"
#include "compute/context/context_split.hpp"
#include "compute/data/batch.hpp"
#include "compute/memory_ledger.hpp"
#include "compute/model/stage_split.hpp"
#include "compute/train/balance.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {
namespace {

using schedules::Op;

// Sequence numbers of point-to-point messages: a training step's, or (top bit) a validation
// batch's; they keep one step's or batch's messages apart from the next one's.
constexpr std::uint16_t evaluation_sequence_bit = 0x8000;

}  // namespace

PipelineTrainer::PipelineTrainer(PipelineSetup setup, compute::Backend& backend, PipelineGroups groups,
                                 MailboxComm& mailbox, monitor::WorkProgress& progress,
                                 std::span<const std::uint16_t> train_tokens, std::span<const std::uint16_t> val_tokens)
    : setup_(std::move(setup)),
      backend_(backend),
      groups_(groups),
      mailbox_(mailbox),
      progress_(progress),
      train_tokens_(train_tokens),
      val_tokens_(val_tokens),
      sampler_(train_tokens.size(), setup_.options.seq_len, setup_.options.seed) {
  const schedules::Schedule& s = setup_.schedule;
  const comm::GridCoord coord = comm::grid_coord(setup_.grid, setup_.rank);
  stage_ = coord.pp;
  replica_ = coord.dp;
  shard_ = coord.tp;
  const compute::ContextShardGroup& context = setup_.context;
  const int context_shards = context.sharded() ? context.split.shards : 1;
  const int islands = setup_.options.islands;
  group_replicas_ = setup_.grid.dp / islands;
  TROUPE_CHECK(setup_.grid.dp % islands == 0 && setup_.options.island == replica_ / group_replicas_ &&
                   group_replicas_ == groups_.dp.group().size(),
               "an island that is not its dp group of consecutive places of the dp axis");
  const int place = replica_ % group_replicas_;
  TROUPE_CHECK(group_replicas_ % context_shards == 0 &&
                   (!context.sharded() ||
                    (context.rank() == place % context_shards && context.split.T == setup_.options.seq_len)),
               "context shards that are not consecutive places of the dp axis");
  data_replica_ = place / context_shards;
  data_replicas_ = group_replicas_ / context_shards;
  rows_ = context.sharded() ? context.split.local_rows() : setup_.options.seq_len;
  // The step's micro-batches over the whole group: under train.balance static the replicas' shares
  // sum them, and this replica's schedule runs its own.
  const std::vector<int>& shares = setup_.options.micro_shares;
  TROUPE_CHECK(shares.empty() || (static_cast<int>(shares.size()) == data_replicas_ &&
                                  shares[static_cast<std::size_t>(data_replica_)] == s.microbatches),
               "uneven shares need a stage of its replica's micro-batches");
  group_micro_batches_ =
      shares.empty() ? s.microbatches * data_replicas_ : std::accumulate(shares.begin(), shares.end(), 0);
  if (setup_.options.balance_window > 0) {
    TROUPE_CHECK(!shares.empty() && !context.sharded(),
                 "dynamic shares without starting shares or with context shards");
    dynamic_.emplace(shares, setup_.options.balance_window);
  }
  TROUPE_CHECK(setup_.grid.pp == s.stages, "the grid does not match the schedule");
  fills_waits_with_weights_ = schedules::fills_waits_with_weights(s.kind) && setup_.grid.tp == 1 &&
                              !context.sharded() && !compute::shards_parameters(setup_.zero) &&
                              setup_.model.experts == 0;
  TROUPE_CHECK((setup_.grid.tp > 1) == (groups_.tp != nullptr), "a tp group exactly when the grid has tensor shards");
  TROUPE_CHECK(setup_.compression.kind == comm::Compression::none || !compute::shards_gradients(setup_.zero),
               "a pipeline stage's gradient sums compress with ZeRO 0 or 1 only");
  TROUPE_CHECK(s.virtual_stages() * s.microbatches < gradient_index_bit, "too many micro-batches for the tag index");
  TROUPE_CHECK(setup_.split.size() == static_cast<std::size_t>(s.virtual_stages()),
               "the layer split does not match the schedule");
  const compute::TrainerOptions& o = setup_.options;
  std::int64_t compressed_total = 0;
  for (int c = 0; c < s.chunks; ++c) {
    const compute::StageLayers& layers = setup_.split[static_cast<std::size_t>(s.virtual_stage(stage_, c))];
    Chunk chunk;
    const compute::TensorShard shard{shard_, setup_.grid.tp};
    const compute::ExpertShard experts{setup_.experts.rank(), setup_.experts.shards()};
    const std::vector<compute::ParameterView> views =
        compute::GPTStage::parameter_views(setup_.model, layers.first_layer, layers.last_layer, shard, experts);
    const std::vector<std::int64_t> cuts =
        tied_cuts(views, layers.first_layer == 0, layers.last_layer == setup_.model.n_layer);
    // The chunk's buffer is runs (of a kind, or cut around a tied embedding) rather than one.
    const bool in_runs = setup_.experts.sharded() || !cuts.empty();
    if (compute::shards_parameters(setup_.zero)) {
      std::vector<compute::ParameterUnit> units =
          compute::GPTStage::parameter_units(setup_.model, layers.first_layer, layers.last_layer, shard, experts);
      const std::int64_t total = units.back().end;
      if (in_runs)
        chunk.source = std::make_unique<compute::ShardedParameters>(backend_, std::move(units), compute::DType::f32,
                                                                    zero3_runs(views, cuts), setup_.zero3_reshard);
      else
        chunk.source = std::make_unique<compute::ShardedParameters>(
            backend_, std::move(units), compute::DType::f32, groups_.dp.position(), shard_offsets(groups_.dp, total),
            unit_exchange(mailbox_, groups_.dp, progress_), setup_.zero3_reshard);
      // Replicas of uneven shares run different numbers of micro-batches: each unit's collectives
      // must not follow them (docs/balance.md, "ZeRO-3").
      if (!o.micro_shares.empty()) chunk.source->hold_for_step();
    }
    chunk.stage = std::make_unique<compute::GPTStage>(setup_.model, backend_, layers.first_layer, layers.last_layer,
                                                      compute::DType::f32, o.recompute, chunk.source.get(),
                                                      shard_group(), context, setup_.experts);
    compute::GPTStage& stage = *chunk.stage;
    stage.set_moe_loss_coefficients(o.moe_aux_coef, o.moe_z_coef);
    if (chunk.source && (groups_.embedding != nullptr || s.v_shape()) && (stage.is_first() || stage.is_last()))
      chunk.source->defer_gradient(stage.tied_embedding_unit());
    if (!setup_.parameters_from_peer) stage.init_parameters(o.seed);
    stage.reserve(o.batch_size, rows_, setup_.peak_stashed, schedules::splits_backward(s.kind));
    chunk.free_slots = every_slot(setup_.peak_stashed);
    chunk.slot_sends.resize(static_cast<std::size_t>(setup_.peak_stashed));
    chunk.micro_batches = std::make_unique<compute::MicroBatchSum>(
        backend_, stage.grads(), compute::shards_parameters(setup_.zero) ? 1 : s.microbatches);
    chunk.compressed_at = compressed_total;
    compressed_total += stage.num_params();
    if (in_runs) chunk.runs.emplace(stage, cuts);
    chunks_.push_back(std::move(chunk));
  }
  // Each chunk's buffer is one bucket (under expert shards one a run of a kind), at its offset in
  // the rank's chunks one after another; bf16 keeps no state and needs no shapes. Under expert
  // shards the dense tensors are the stage's data-parallel group's compressor's, the experts' their
  // own group's; with one expert group no rank sums its experts, and PowerSGD's state of them stays
  // as drawn (Q) and zero (residuals), kept for the checkpoints' whole-model kinds.
  const bool sharded = setup_.experts.sharded();
  if (setup_.compression.kind != comm::Compression::none && group_replicas_ > 1) {
    const bool powersgd = setup_.compression.kind == comm::Compression::powersgd;
    auto tensors = [&](TensorKinds kinds) {
      return powersgd ? compressed_tensors(kinds) : std::vector<comm::GradientTensor>{};
    };
    compressor_ = gradient_compressor(mailbox_, groups_.dp, progress_, setup_.compression,
                                      tensors(sharded ? TensorKinds::dense : TensorKinds::all));
    if (sharded && (groups_.expert_data != nullptr || powersgd))
      expert_compressor_ =
          gradient_compressor(mailbox_, groups_.expert_data != nullptr ? *groups_.expert_data : groups_.dp, progress_,
                              setup_.compression, tensors(TensorKinds::experts));
  }
  data_parallel_ = group_hooks(mailbox_, groups_.dp, progress_, setup_.zero, compressor_);
  expert_data_.zero_stage = setup_.zero;  // alone: the rank keeps its experts' state whole
  if (groups_.expert_data != nullptr)
    expert_data_ = group_hooks(mailbox_, *groups_.expert_data, progress_, setup_.zero, expert_compressor_);
  std::vector<compute::ZeroStep::Buffer> buffers;
  for (Chunk& chunk : chunks_) {
    compute::GPTStage& stage = *chunk.stage;
    chunk.first_buffer = static_cast<int>(buffers.size());
    if (chunk.runs) {
      // A buffer a run of a kind: the dense ones summed over the stage's dp group, the rank's
      // experts over the ranks holding them (compute/train/expert_gradients.hpp). Each begins at its
      // run in the chunk's own buffer (its sum offset adds where the chunk lies among the rank's).
      // Under ZeRO-3 the chunk's source keeps each one's segment.
      compute::DataParallel dp = data_parallel_;
      dp.sharded = chunk.source.get();
      for (compute::ZeroStep::Buffer& b : chunk.runs->zero_buffers(stage.views(), stage.params(), stage.grads(), dp,
                                                                   expert_data_, chunk.compressed_at))
        buffers.push_back(std::move(b));
      for (const compute::ExpertGradients::Range& run : chunk.runs->ranges()) chunk.buffer_begins.push_back(run.begin);
      continue;
    }
    // The chunk's ZeRO shard: the segment of its buffer the stage's dp group reduce-scatters to this
    // replica and gathers from it (ZeRO-3's source keeps the same one).
    const comm::Slice own = comm::segment_of(stage.num_params(), groups_.dp.group().size(), groups_.dp.position());
    buffers.push_back({stage.views(), stage.num_params(), stage.params(), stage.grads(), stage.kept_begin(), own.offset,
                       own.offset + own.count, chunk.source.get(), chunk.compressed_at});
    chunk.buffer_begins.push_back(0);
  }
  zero_ =
      std::make_unique<compute::ZeroStep>(backend_, data_parallel_, compute::DType::f32, o.adamw, std::move(buffers));
  compute::MemoryScope scope(compute::MemoryKind::activations);  // the micro-batches' token ids
  for (int j = 0; j < s.microbatches; ++j) {
    inputs_.push_back(compute::Tensor::zeros({o.batch_size, rows_}, compute::DType::i32));
    targets_.push_back(compute::Tensor::zeros({o.batch_size, rows_}, compute::DType::i32));
  }
  if (context.sharded()) {
    whole_inputs_ = compute::Tensor::zeros({o.batch_size, o.seq_len}, compute::DType::i32);
    whole_targets_ = compute::Tensor::zeros({o.batch_size, o.seq_len}, compute::DType::i32);
  }
}

void PipelineTrainer::fill_rows(int micro, const std::function<void(compute::Tensor&, compute::Tensor&)>& fill) {
  compute::Tensor& inputs = inputs_[static_cast<std::size_t>(micro)];
  compute::Tensor& targets = targets_[static_cast<std::size_t>(micro)];
  const compute::ContextShardGroup& context = setup_.context;
  if (!context.sharded()) return fill(inputs, targets);
  fill(whole_inputs_, whole_targets_);
  const int B = setup_.options.batch_size;
  compute::context::take_rows(inputs.data_as<std::int32_t>(), whole_inputs_.data_as<std::int32_t>(), B, 1,
                              context.split, context.rank());
  compute::context::take_rows(targets.data_as<std::int32_t>(), whole_targets_.data_as<std::int32_t>(), B, 1,
                              context.split, context.rank());
}

std::vector<comm::GradientTensor> PipelineTrainer::compressed_tensors(TensorKinds kinds) const {
  std::vector<comm::GradientTensor> tensors;
  for (const Chunk& chunk : chunks_) {
    const std::vector<compute::GPTStage::Run>& runs = chunk.stage->global_runs();
    std::vector<compute::ParameterView> views;
    for (const compute::ParameterView& view : chunk.stage->views())
      if (kinds == TensorKinds::all || view.expert == (kinds == TensorKinds::experts)) views.push_back(view);
    for (comm::GradientTensor tensor : gradient_tensors(views)) {
      const auto run = std::find_if(runs.begin(), runs.end(), [&](const compute::GPTStage::Run& r) {
        return r.local <= tensor.offset && tensor.offset < r.local + r.count;
      });
      TROUPE_CHECK(run != runs.end(), "a stage's parameter lies outside its global runs");
      tensor.global_offset = run->global + (tensor.offset - run->local);
      tensor.offset += chunk.compressed_at;
      tensors.push_back(tensor);
    }
  }
  return tensors;
}

std::vector<std::int64_t> PipelineTrainer::tied_cuts(std::span<const compute::ParameterView> views, bool first,
                                                     bool last) const {
  const bool tied = groups_.embedding != nullptr || setup_.schedule.v_shape();
  if (!tied || (setup_.outer_state && compute::shards_parameters(setup_.zero)) || first == last) return {};
  // The first chunk's wte leads its buffer; the last one's copy ends it.
  const compute::ParameterView& embedding = first ? views.front() : views.back();
  TROUPE_CHECK(embedding.name == "wte.weight", "a tied embedding that is not where the stage keeps wte");
  return {embedding.offset, embedding.offset + embedding.numel()};
}

std::vector<compute::RunShards> PipelineTrainer::zero3_runs(std::span<const compute::ParameterView> views,
                                                            std::span<const std::int64_t> cuts) {
  // Each group's hooks that cut its runs and move their units' pieces (the step's own are made
  // after the chunks, whose sources need these first); alone at its place, a rank keeps its
  // experts whole.
  auto hooks = [this](comm::Communicator& comm) {
    compute::DataParallel dp = group_hooks(mailbox_, comm, progress_, setup_.zero);
    dp.unit_exchange = unit_exchange(mailbox_, comm, progress_);
    return dp;
  };
  const compute::DataParallel alone{0, 1, setup_.zero};
  return compute::ExpertGradients::zero3_runs(views, setup_.experts.sharded(), hooks(groups_.dp),
                                              groups_.expert_data ? hooks(*groups_.expert_data) : alone, cuts);
}

compute::TensorShardGroup PipelineTrainer::shard_group() {
  compute::TensorShardGroup group;
  group.shard = {shard_, setup_.grid.tp};
  if (groups_.tp == nullptr) return group;
  group.sequence_parallel = setup_.sequence_parallel;
  group.all_reduce = [this](compute::Tensor t) {
    wait(mailbox_.all_reduce(*groups_.tp, std::move(t)), "a tensor-parallel sum");
  };
  group.all_gather = [this](compute::Tensor t) {
    wait(mailbox_.all_gather(*groups_.tp, std::move(t)), "a tensor-parallel gather");
  };
  group.reduce_scatter = [this](compute::Tensor t) {
    wait(mailbox_.reduce_scatter(*groups_.tp, std::move(t)), "a tensor-parallel reduce-scatter");
  };
  return group;
}

void PipelineTrainer::resume_at(long steps) {
  steps_ = steps;
  zero_->resume_at(steps);
  // A restore read other ranks' residuals of the experts this rank does not hold into the zeros it
  // writes for them; it holds none of theirs.
  if (other_experts_residuals_.defined())
    std::fill_n(other_experts_residuals_.data_as<float>(), other_experts_residuals_.numel(), 0.0f);
}

void PipelineTrainer::renew(int epoch) {
  arriving_.clear();
  handed_gradients_.clear();
  slot_of_.clear();
  for (Chunk& chunk : chunks_) {
    chunk.free_slots = every_slot(setup_.peak_stashed);
    for (auto& sends : chunk.slot_sends) sends.clear();
    chunk.stage->abandon_weights();  // a zero-bubble step cut between a B and its W
  }
  in_use_ = 0;
  // A replacement starts from the first shares, measuring anew: so does every survivor, and the
  // next step takes them (dynamic_shares.hpp: nothing measured).
  if (dynamic_) {
    dynamic_->resume(std::vector<double>(setup_.options.micro_shares.size(), 0.0));
    if (setup_.rank == 0)
      monitor::logger("train")->info(
          "balance dynamic: replica shares {} of {} micro-batches after a recovery (the first shares, measuring anew)",
          compute::shares_text(dynamic_->shares()), group_micro_batches_);
  }
  // A replacement counts validation batches from 0: under the new id every rank does.
  evaluations_ = 0;
  transfer_group_id_ = comm::epoch_group_id(comm::pp_group_id, epoch);
}

void PipelineTrainer::abandon_step() { zero_->abandon_step(); }

std::int64_t PipelineTrainer::tokens_per_step() const {
  const compute::TrainerOptions& o = setup_.options;
  return std::int64_t{o.batch_size} * o.seq_len * group_micro_batches_ * o.islands;  // every island's
}

void PipelineTrainer::record_into(monitor::TraceRecorder& recorder) {
  trace_ = &recorder;
  recorder.name_process(replica_, "replica " + std::to_string(replica_));
  const std::string shard = setup_.grid.tp > 1 ? ", tensor shard " + std::to_string(shard_) : "";
  recorder.name_track(track(), "stage " + std::to_string(stage_) + shard + " (rank " + std::to_string(setup_.rank) + ")");
}

void PipelineTrainer::reduce_gradients() {
  auto waiting = progress_.wait_for("the gradient sums");
  for (Chunk& chunk : chunks_) chunk.micro_batches->add_earlier();
  // Under sequence parallelism each shard's LayerNorm gradients cover its rows only; they are
  // summed before the data-parallel sums, which read and write the same buffers.
  bool partial = false;
  for (Chunk& chunk : chunks_)
    for (const compute::Tensor& rows_only : chunk.stage->sequence_partial_grads()) {
      mailbox_.all_reduce(*groups_.tp, rows_only);
      partial = true;
    }
  if (partial) check_comm(mailbox_.wait_all());
  // The tied embedding's two shares: the first virtual stage's lookup, the last one's lm head
  // (under ZeRO-3 in the unit's gradient it keeps over the step, before its reduce-scatter).
  auto shares_of = [](Chunk& holder) {
    const compute::GPTStage& stage = *holder.stage;
    return holder.source ? stage.tied_embedding_in(holder.source->deferred_gradient(stage.tied_embedding_unit()))
                         : stage.tied_embedding_grad();
  };
  if (groups_.embedding != nullptr) {
    // Waited for alone, before the data-parallel sums: they read and write the same buffer.
    const compute::Tensor shares = shares_of(stage_ == 0 ? chunks_.front() : chunks_.back());
    check_comm(mailbox_.wait(mailbox_.all_reduce(*groups_.embedding, shares)));
  } else if (setup_.schedule.v_shape() && stage_ == 0) {
    // ZB-V: both ends are this stage's chunks; both take the sum, lookup's share plus the head's.
    compute::Tensor first = shares_of(chunks_.front()), last = shares_of(chunks_.back());
    backend_.residual_forward(first, first, last);
    backend_.copy(last, first);
  }
  zero_->sum_gradients();
  check_comm(mailbox_.wait_all());  // the step's sends
}

double PipelineTrainer::own_sum_of_squares(bool gradients) {
  double sum = 0, experts = 0;
  for (const Chunk& chunk : chunks_) {
    compute::GPTStage& stage = *chunk.stage;
    // The local ranges [from, to) this replica holds, whose values `data` holds from local
    // `data_begin` on: of the gradients, what it holds of their sum in each of the chunk's buffers
    // (its segment from ZeRO-2 on); of the parameters, all it keeps (under ZeRO-3 with the buffer in
    // runs, a segment of each).
    struct Held {
      std::int64_t from, to, data_begin;
      const compute::Tensor* data;
    };
    std::vector<Held> held;
    const bool kept_runs = chunk.runs && compute::shards_parameters(setup_.zero);
    if (!gradients && !kept_runs)
      held.push_back(
          {stage.kept_begin(), stage.kept_begin() + stage.params().numel(), stage.kept_begin(), &stage.params()});
    for (std::size_t i = 0; i < chunk.buffer_begins.size(); ++i) {
      const int b = chunk.first_buffer + static_cast<int>(i);
      const std::int64_t at = chunk.buffer_begins[i];
      const compute::ZeroStep::Buffer& buffer = zero_->buffer(b);
      const std::int64_t kept = at + buffer.kept_begin;  // where the buffer's kept tensors start
      if (gradients) {
        const auto [from, to] = zero_->summed_range(b);
        if (kept_runs)
          held.push_back({at + from, at + to, kept, &buffer.grads});
        else
          held.push_back({at + from, at + to, stage.kept_begin(), &stage.grads()});
      } else if (kept_runs) {
        held.push_back({kept, kept + buffer.params.numel(), kept, &buffer.params});
      }
    }
    for (const Held& h : held)
      for (const compute::GPTStage::Run& run : stage.global_runs()) {
        if (run.embedding_copy || (run.replicated && shard_ != 0)) continue;
        const std::int64_t lo = std::max(h.from, run.local), hi = std::min(h.to, run.local + run.count);
        if (lo < hi)
          (run.expert_shard ? experts : sum) += backend_.sum_of_squares(h.data->slice(lo - h.data_begin, {hi - lo}));
      }
  }
  const char* what = gradients ? "the gradient norm's shards" : "the parameter norm's shards";
  if (gradients && compute::shards_gradients(setup_.zero)) {
    // Each replica its segments: of the dense runs over the dp group, of its experts over the ranks
    // holding them, so the sum over the dp group counts every element once.
    sum = zero_->group_squares(sum + experts);
  } else if (!gradients && compute::shards_parameters(setup_.zero) && setup_.experts.sharded()) {
    sum = sum_over(groups_.dp, sum + experts, what);  // the same segments, of the parameters
  } else {
    if (!gradients && compute::shards_parameters(setup_.zero) && group_replicas_ > 1)
      sum = sum_over(groups_.dp, sum, what);
    // Under expert shards the first expert group's ranks hold every expert once: their squares,
    // summed over the stage's dp group, complete the dense ones (equal on every replica).
    if (setup_.experts.sharded()) sum += sum_over(groups_.dp, replica_ < setup_.experts.shards() ? experts : 0.0, what);
  }
  if (groups_.tp != nullptr) sum = sum_over(*groups_.tp, sum, what);
  return sum;
}

double PipelineTrainer::sum_over(comm::Communicator& group, double value, const char* what) {
  compute::Tensor t = compute::Tensor::zeros({1}, compute::DType::f64);
  t.data_as<double>()[0] = value;
  auto waiting = progress_.wait_for(what);
  check_comm(mailbox_.wait(mailbox_.all_reduce(group, t)));
  return t.data_as<double>()[0];
}

compute::StepResult PipelineTrainer::step() {
  if (dynamic_ && dynamic_->shares() != setup_.options.micro_shares) take_shares(dynamic_->shares());
  const schedules::Schedule& s = setup_.schedule;
  const compute::TrainerOptions& o = setup_.options;
  compute::StepResult result;
  result.step = steps_;
  result.lr = o.lr.at(steps_);
  if (data_parallel_.begin_step) data_parallel_.begin_step(steps_);
  if (expert_data_.begin_step) expert_data_.begin_step(steps_);
  for (Chunk& chunk : chunks_) {
    chunk.stage->zero_grad();
    chunk.backwards = 0;
  }
  routing_ = {};
  const std::vector<int>& shares = o.micro_shares;
  for (int j = 0; j < s.microbatches; ++j) {
    // Even: micro-batch j of replica r is the step's unit j·R + r; uneven: its first_unit(r) + j.
    const int unit =
        shares.empty() ? j * data_replicas_ + data_replica_ : compute::first_unit(shares, data_replica_) + j;
    const std::uint64_t first = compute::unit_first_sample(steps_, group_micro_batches_, data_replicas_, unit, o.island,
                                                           o.islands, o.batch_size);
    fill_rows(j, [&](compute::Tensor& inputs, compute::Tensor& targets) {
      compute::fill_batch(inputs.data_as<std::int32_t>(), targets.data_as<std::int32_t>(), train_tokens_, sampler_,
                          first, o.batch_size);
    });
  }
  // Every receive of the step is posted now, whatever its place in the stream: a large message
  // moves only once its receive is posted, and a sender must not stall on a receiver that is
  // still computing. The stream's order still decides when each compute waits for its input.
  for (const schedules::Instruction& ins : s.streams[static_cast<std::size_t>(stage_)])
    if (ins.op == Op::recv_act || ins.op == Op::recv_grad) post_receive(ins);
  double loss_sum = 0;
  busy_us_ = 0;
  for (Chunk& chunk : chunks_)
    if (chunk.source) chunk.source->take_waited_seconds();  // the waits of this step's ops only
  const double schedule_start = monitor::trace_clock_us();
  const std::vector<schedules::Instruction>& stream = s.streams[static_cast<std::size_t>(stage_)];
  weights_.emplace(stream);  // the stream is the step's (train.balance dynamic may change it)
  for (at_ = 0; at_ < stream.size(); ++at_) {
    const schedules::Instruction& ins = stream[at_];
    if (weights_->ran_early(at_)) continue;
    // An order that came meanwhile (a peer failed, the job recovers in place) is taken before each
    // forward or backward rather than at the stage's next wait; this rank has not yet posted its
    // step's gradient sums, so no rank can have completed the step.
    if (schedules::is_compute(ins.op)) mailbox_.take_waiting_orders();
    const double start = monitor::trace_clock_us();
    if (ins.op == Op::reduce_grads) {
      // Under ZeRO-3 the ops wait inside for the other replicas' pieces of each unit: idle time,
      // and the others' pace, not this stage's (its measured speed, observe_speeds).
      for (Chunk& chunk : chunks_)
        if (chunk.source) busy_us_ -= 1e6 * chunk.source->take_waited_seconds();
      bubble_fraction_ = std::max(0.0, 1.0 - busy_us_ / std::max(start - schedule_start, 1.0));
      reduce_gradients();
      for (Chunk& chunk : chunks_)
        for (auto& sends : chunk.slot_sends) sends.clear();  // wait_all saw them end
      if (shares.empty()) {
        const double loss = sum_over(groups_.pp, loss_sum, "the loss sum") / s.microbatches;
        result.loss = group_replicas_ > 1 ? sum_over(groups_.dp, loss, "the loss sum") / group_replicas_ : loss;
      } else {  // the global batch's: every micro-batch's loss over the group's
        result.batch_share = static_cast<double>(s.microbatches) / group_micro_batches_;
        const double replica_sum = sum_over(groups_.pp, loss_sum, "the loss sum");
        result.loss = sum_over(groups_.dp, replica_sum, "the loss sum") / group_micro_batches_;
        if (dynamic_) result.micro_batch_seconds = observe_speeds(result);
      }
      if (setup_.model.experts > 0) {
        result.moe_of_rank = routing_;
        result.moe = pipeline_routing();
      }
      result.grad_norm = std::sqrt(sum_over(groups_.pp, own_sum_of_squares(true), "the gradient norm"));
      zero_->clip(result.grad_norm, o.grad_clip);
      trace("step", "reduce_grads", start);
    } else if (ins.op == Op::optimizer_step) {
      zero_->update(result.lr);
      trace("step", "optimizer_step", start);
    } else {
      run(ins, loss_sum);
    }
  }
  ++steps_;
  return result;
}

double PipelineTrainer::evaluate(int batches) {
  const schedules::Schedule& s = setup_.schedule;
  const compute::TrainerOptions& o = setup_.options;
  compute::MemoryScope scope(compute::MemoryKind::activations);
  // This replica's part of the validation set: `batches` global batches of windows, split in equal
  // parts over the replicas (compute::Trainer::evaluate's split), in micro-batches of B through
  // micro-batch 0's token buffers (no step is in flight). Under DiLoCo each island evaluates the
  // set of all the islands' replicas, on its own weights.
  const int micro_batches = batches * (group_micro_batches_ / data_replicas_) * o.islands;
  const std::uint64_t first = static_cast<std::uint64_t>(data_replica_) * micro_batches * o.batch_size;
  const compute::Tensor& inputs = inputs_.front();
  const compute::Tensor& targets = targets_.front();
  double sum = 0;
  for (int i = 0; i < micro_batches; ++i) {
    fill_rows(0, [&](compute::Tensor& in, compute::Tensor& target) {
      compute::fill_sequential_batch(in.data_as<std::int32_t>(), target.data_as<std::int32_t>(), val_tokens_, o.seq_len,
                                     first + static_cast<std::uint64_t>(i) * o.batch_size, o.batch_size);
    });
    const auto sequence = static_cast<std::uint16_t>(evaluation_sequence_bit | (evaluations_++ & 0x7fff));
    // Chunks in virtual-stage order, which is the order activations flow: no cycle.
    for (int c = 0; c < s.chunks; ++c) {
      compute::GPTStage& stage = *chunks_[static_cast<std::size_t>(c)].stage;
      const int vs = s.virtual_stage(stage_, c);
      const bool last = vs == s.virtual_stages() - 1;
      compute::Tensor input = inputs;
      if (vs > 0 && schedules::local_hop(s, vs - 1, vs)) {
        input = chunks_[static_cast<std::size_t>(s.chunk_of(vs - 1))].stage->output(0);  // the V's bottom
      } else if (vs > 0) {
        input = backend_.message_buffer(stage.stream_shape(o.batch_size, rows_), compute::DType::f32);
        const comm::MessageKey key{comm::MessageKind::point_to_point, transfer_group_id_, sequence,
                                   static_cast<std::uint16_t>(vs - 1)};
        wait(mailbox_.recv(groups_.engine, rank_of_stage(s.stage_of(vs - 1)), key, input),
             "validation activations");
      }
      const double loss = stage.forward(0, input, last ? targets : compute::Tensor{});
      if (last) {
        sum += loss;
      } else if (!schedules::local_hop(s, vs, vs + 1)) {
        const comm::MessageKey key{comm::MessageKind::point_to_point, transfer_group_id_, sequence,
                                   static_cast<std::uint16_t>(vs)};
        wait(mailbox_.send(groups_.engine, rank_of_stage(s.stage_of(vs + 1)), key, stage.output(0)),
             "a validation send");
      }
    }
  }
  zero_->release_gathered();
  if (micro_batches == 0) return 0.0;
  const double mean = sum_over(groups_.pp, sum, "the validation loss sum") / micro_batches;
  return group_replicas_ > 1 ? sum_over(groups_.dp, mean, "the validation loss") / group_replicas_ : mean;
}

std::vector<int> PipelineTrainer::peak_stashed_measured() {
  compute::Tensor peaks = compute::Tensor::zeros({setup_.grid.pp}, compute::DType::f64);
  peaks.data_as<double>()[stage_] = peak_in_use_;
  auto waiting = progress_.wait_for("the activation peaks");
  if (Status s = mailbox_.wait(mailbox_.all_reduce(groups_.pp, peaks)); !s) throw std::runtime_error(s.error().message);
  std::vector<int> result;
  for (int stage = 0; stage < setup_.grid.pp; ++stage) result.push_back(static_cast<int>(peaks.data_as<double>()[stage]));
  return result;
}

double PipelineTrainer::param_norm() {
  return std::sqrt(sum_over(groups_.pp, own_sum_of_squares(false), "the parameter norm"));
}

}  // namespace troupe::actors
