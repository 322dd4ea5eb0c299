#include "actors/worker/replica_loop.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <numeric>
#include <vector>

#include <spdlog/fmt/fmt.h>

#include "actors/worker/held_zeros.hpp"
#include "compute/memory_ledger.hpp"
#include "compute/train/expert_gradients.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {

compute::TrainerOptions trainer_options(const ResolvedJob& job) {
  const TrainOptions& t = job.config.train;
  compute::TrainerOptions o;
  o.batch_size = t.batch_size;
  o.seq_len = t.seq_len;
  o.grad_accum = t.grad_accum;
  o.lr = {t.lr, t.min_lr, t.warmup_steps, t.steps};
  o.adamw = {t.beta1, t.beta2, t.eps, t.weight_decay};
  o.grad_clip = t.grad_clip;
  o.seed = t.seed;
  o.recompute = t.recompute;
  o.moe_aux_coef = t.moe_aux_coef;
  o.moe_z_coef = t.moe_z_coef;
  return o;
}

std::vector<int> micro_shares(const ResolvedJob& job, int replicas, int island) {
  if (job.config.train.balance == compute::BalanceMode::none) return {};
  std::vector<double> speeds(static_cast<std::size_t>(replicas), 1.0);
  if (!job.replica_speeds.empty()) {
    const auto first = static_cast<std::size_t>(island) * speeds.size();
    TROUPE_CHECK(first + speeds.size() <= job.replica_speeds.size() && job.replica_speeds.size() % speeds.size() == 0,
                 "train.replica_speeds for another number of replicas");
    std::copy_n(job.replica_speeds.begin() + static_cast<std::ptrdiff_t>(first), speeds.size(), speeds.begin());
  }
  // A replica's micro-batches a step: its pipeline's with stages, its accumulation's without.
  const int per_replica =
      job.config.pipeline.stages > 1 ? job.config.pipeline.microbatches : job.config.train.grad_accum;
  auto shares = compute::proportional_shares(per_replica * replicas, speeds);
  TROUPE_CHECK(shares.ok(), "train.balance static: " + (shares.ok() ? std::string() : shares.error().message));
  return std::move(*shares);
}

std::string announce_shares(const ResolvedJob& job, const std::vector<int>& shares, int rank) {
  if (shares.empty()) return {};
  const std::string text = fmt::format("replica shares {} of {} micro-batches", compute::shares_text(shares),
                                       std::accumulate(shares.begin(), shares.end(), 0));
  if (rank == 0)
    monitor::logger("train")->info("balance {}: {}", compute::balance_mode_name(job.config.train.balance), text);
  return text;
}

void log_share_change(const compute::StepResult& result, const std::vector<int>& shares,
                      const std::vector<double>& seconds_per_micro_batch) {
  std::string times;
  for (double s : seconds_per_micro_batch) times += fmt::format("{}{:.3f} s", times.empty() ? "" : ", ", s);
  monitor::logger("train")->info(
      "balance dynamic: step {}: replica shares {} of {} micro-batches (times per micro-batch {})", result.step + 1,
      compute::shares_text(shares), std::accumulate(shares.begin(), shares.end(), 0), times);
}

namespace {

compute::TrainerOptions replica_options(const ResolvedJob& job, compute::DataParallel data_parallel,
                                        compute::ShardedParameters* sharded, const compute::IslandGroup& islands) {
  compute::TrainerOptions options = trainer_options(job);
  options.data_parallel = std::move(data_parallel);
  options.data_parallel.sharded = sharded;
  options.islands = islands.count;
  options.island = islands.index;
  // The group's ranks are its replicas' context shards: a replica takes its share as one.
  options.micro_shares = micro_shares(job, options.data_parallel.size / job.config.context.shards, islands.index);
  if (job.config.train.balance == compute::BalanceMode::dynamic)
    options.balance_window = job.config.train.balance_window;
  return options;
}

// ZeRO-3's parameter source for this rank's shard; none below stage 3. Under expert shards it keeps
// a segment of each run of a kind of the rank's layout, each over its group (expert_gradients.hpp).
std::unique_ptr<compute::ShardedParameters> zero3_source(const ResolvedJob& job, compute::Backend& backend,
                                                         const compute::DataParallel& dp,
                                                         const compute::ExpertGroup& experts) {
  if (!compute::shards_parameters(dp.zero_stage)) return nullptr;
  const bool reshard = job.config.train.zero3_reshard;
  if (experts.sharded()) {
    const compute::ExpertShard shard{experts.rank(), experts.shards()};
    const compute::DataParallel alone{0, 1, dp.zero_stage};
    return std::make_unique<compute::ShardedParameters>(
        backend, compute::GPT::parameter_units(job.model, shard), compute::DType::f32,
        compute::ExpertGradients::zero3_runs(compute::ParameterLayout(job.model, shard).views(), true, dp,
                                             dp.expert_data ? *dp.expert_data : alone),
        reshard);
  }
  std::vector<std::int64_t> shards = dp.shard_offsets;
  if (shards.empty()) shards = {0, compute::ParameterLayout(job.model).total()};
  return std::make_unique<compute::ShardedParameters>(backend, compute::GPT::parameter_units(job.model),
                                                      compute::DType::f32, dp.rank, std::move(shards), dp.unit_exchange,
                                                      reshard);
}

std::string replica_layout(int ranks, int batch_size, int seq_len, int grad_accum) {
  return fmt::format("{} rank(s) x batch {} x seq {} x accum {}", ranks, batch_size, seq_len, grad_accum);
}

// Under expert shards: `state` (the parameters, and under ZeRO 0 both moments), each run of the rank's buffer at its
// place in the whole model's layout; dense runs written by the first replica, the rank's experts by
// the first expert group's ranks (dp positions below EP), which together hold every expert once.
std::vector<checkpoint::HeldRange> expert_shard_held(const compute::GPTStage& stage,
                                                     const std::vector<compute::Tensor>& state, int rank,
                                                     int expert_shards) {
  std::vector<checkpoint::HeldRange> held;
  const char* kinds[] = {"param", "adam_m", "adam_v"};
  for (std::size_t k = 0; k < state.size(); ++k)
    for (const compute::GPTStage::Run& run : stage.global_runs())
      held.push_back({kinds[k], run.global, run.global + run.count, state[k].data_as<float>() + run.local,
                      run.expert_shard ? rank < expert_shards : rank == 0});
  return held;
}

// Under expert shards with ZeRO 1 to 3: the moments of each of the step's buffers (a run of a kind,
// expert_gradients.hpp), this rank's segment of it, at their places in the whole model's layout,
// and the parameters: under ZeRO-3 that same segment, else as under ZeRO 0. Each rank writes its
// segments, which no other rank holds.
std::vector<checkpoint::HeldRange> expert_zero_held(const compute::GPTStage& stage, compute::Tensor& params,
                                                    compute::ZeroStep& zero, int rank, int expert_shards) {
  const bool zero3 = compute::shards_parameters(zero.stage());
  std::vector<checkpoint::HeldRange> held;
  if (!zero3) held = expert_shard_held(stage, {params}, rank, expert_shards);
  for (int b = 0; b < zero.buffers(); ++b) {
    compute::AdamW& adamw = zero.optimizer(b);
    const auto [begin, end] = adamw.range();
    const compute::ZeroStep::Buffer& buffer = zero.buffer(b);
    const std::int64_t first = buffer.sum_offset + begin, last = buffer.sum_offset + end;
    for (const compute::GPTStage::Run& run : stage.global_runs()) {
      const std::int64_t from = std::max(first, run.local), to = std::min(last, run.local + run.count);
      if (from >= to) continue;
      const std::int64_t global = run.global + (from - run.local), count = to - from;
      if (zero3) held.push_back({"param", global, global + count, buffer.params.data_as<float>() + (from - first)});
      held.push_back({"adam_m", global, global + count, adamw.first_moments().data_as<float>() + (from - first)});
      held.push_back({"adam_v", global, global + count, adamw.second_moments().data_as<float>() + (from - first)});
    }
  }
  return held;
}

// Under expert shards: a gradient-sum state (PowerSGD's Q or a residual, in the rank's local layout)
// at its places in the whole model's order, each kind covering it as without expert shards: the
// dense sums' state over the dense runs, the experts' over the rank's expert runs. Q is written
// where the parameters are (the same over the ranks holding them); a residual by every rank, with
// `zeros` for the experts it does not hold, whose residuals are the ranks' holding them (PowerSGD
// takes only the ranks' sum of the residuals, so a run resumed in another layout goes on alike).
void add_expert_shard_state(std::vector<checkpoint::HeldRange>& held, const compute::GPTStage& stage,
                            const compute::DataParallel::SumState& state, int rank, int expert_shards,
                            compute::Tensor& zeros) {
  float* values = state.values.data_as<float>();
  std::vector<std::pair<std::int64_t, std::int64_t>> own;  // global
  for (const compute::GPTStage::Run& run : stage.global_runs()) {
    own.emplace_back(run.global, run.global + run.count);
    if (run.expert_shard != state.experts) continue;
    const bool writes = !state.replicated || (run.expert_shard ? rank < expert_shards : rank == 0);
    held.push_back({state.kind, run.global, run.global + run.count, values + run.local, writes, false, true});
  }
  if (state.replicated || state.experts) return;
  hold_zeros_outside(held, state.kind, std::move(own), 0, stage.global_layout().total(), zeros);
}

// The trainer is made from initialised parameters, as one process would make it; a replacement's
// come from its donor instead.
compute::GPT& initialised(compute::GPT& model, std::uint64_t seed, bool initialise) {
  if (initialise) model.init_parameters(seed);
  return model;
}

}  // namespace

ReplicaLoop::ReplicaLoop(const ResolvedJob& job, compute::Backend& backend, const JobData& data,
                         compute::DataParallel data_parallel, bool initialise, compute::ContextShardGroup context,
                         compute::IslandGroup islands, compute::ExpertGroup experts, monitor::WorkerMetrics* metrics)
    : backend_(backend),
      // Every rank writes when it holds state of its own: a ZeRO shard of the moments, or a
      // compression residual; the commit waits for all of them. Islands are consecutive places of
      // the dp axis: island i's ranks follow those of islands 0 … i − 1.
      place_{islands.index * data_parallel.size + data_parallel.rank,
             {data_parallel.size * islands.count, 1, 1},
             compute::shards_optimizer_state(data_parallel.zero_stage) || !data_parallel.sum_state.empty()
                 ? data_parallel.size
                 : experts.shards()},
      moments_sharded_(compute::shards_optimizer_state(data_parallel.zero_stage)),
      sum_over_group_(data_parallel.sum),
      sharded_(zero3_source(job, backend, data_parallel, experts)),
      model_(job.model, backend, compute::DType::f32, trainer_options(job).recompute, sharded_.get(), context, experts),
      trainer_(initialised(model_, job.config.train.seed, initialise),
               replica_options(job, std::move(data_parallel), sharded_.get(), islands), data.train, data.val),
      island_(islands.index),
      metrics_(metrics) {
  const TrainOptions& t = job.config.train;
  const int rank = place_.rank;
  layout_ = replica_layout(place_.grid.dp, t.batch_size, t.seq_len, t.grad_accum);
  const std::vector<int>& shares = trainer_.micro_shares();
  if (metrics_) {
    const int own = shares.empty() ? t.grad_accum : shares[static_cast<std::size_t>(place_.rank)];
    metrics_->set_batch_share(static_cast<double>(own) * t.batch_size * t.seq_len /
                              static_cast<double>(trainer_.tokens_per_step()));
  }
  if (!shares.empty()) layout_ += ", " + announce_shares(job, shares, rank);
  if (context.sharded())
    layout_ += fmt::format(", {} context shards ({}) of seq {}", context.split.shards,
                           compute::context::context_method_name(context.method), context.split.local_rows());
  if (experts.sharded())
    layout_ += fmt::format(", {} expert shards of {} experts each", experts.shards(),
                           job.model.experts / experts.shards());
  // Replicas hold equal parameters and (ZeRO 0) equal moments: the first writes them. Under ZeRO
  // each rank's moments are its own shard and every rank writes its shard; under ZeRO-3 its
  // parameters too. Under expert shards the first expert group's ranks write their experts'
  // parameters (and under ZeRO 0 their moments). Under DiLoCo the inner state written is island
  // 0's: its ranks (the first `writers`, all the commit waits for) write their shards of the
  // moments, and under ZeRO-3 of the parameters.
  const bool writes_params = rank == 0 || (sharded_ && island_ == 0);
  const bool writes_moments = writes_params || (moments_sharded_ && island_ == 0);
  compute::AdamW& adamw = trainer_.optimizer();
  const auto [moments_begin, moments_end] = adamw.range();
  state_ = {&model_.params(), &adamw.first_moments(), &adamw.second_moments()};
  for (compute::Tensor* tensor : state_) {
    // A device backend's host copies, counted as what they copy.
    compute::MemoryScope scope(tensor == state_[0] ? compute::MemoryKind::parameters
                                                   : compute::MemoryKind::optimizer_state);
    mirrors_.push_back(backend.device() == compute::Device::cpu ? *tensor
                                                                : compute::Tensor::zeros(tensor->shape(), tensor->dtype()));
  }
  // Under expert shards each run's ranges replace these (under ZeRO-3 the rank keeps a segment of
  // each run: params_begin is its first's).
  const std::int64_t params_begin = model_.kept_begin(), params_end = params_begin + model_.params().numel();
  held_ = {{"param", params_begin, params_end, mirrors_[0].data_as<float>(), writes_params},
           {"adam_m", moments_begin, moments_end, mirrors_[1].data_as<float>(), writes_moments},
           {"adam_v", moments_begin, moments_end, mirrors_[2].data_as<float>(), writes_moments}};
  if (experts.sharded() && moments_sharded_) {
    TROUPE_CHECK(backend.device() == compute::Device::cpu, "expert shards off the CPU");
    held_ = expert_zero_held(model_.stage(), model_.params(), trainer_.zero_step(), rank, experts.shards());
  } else if (experts.sharded()) {
    held_ = expert_shard_held(model_.stage(), mirrors_, rank, experts.shards());
  }
  if (t.sync == compute::SyncMode::diloco) {
    // The outer state is the same on every island (it changes only at a sync): the first rank writes
    // it, under ZeRO-3 each of island 0's ranks its shard (its part of each fragment synced with the
    // same shard of the other islands).
    const int count = islands.count;
    outer_ = std::make_unique<OuterSyncs>(
        job, model_.params(), compute::fragments_within(outer_options(job).fragments, params_begin, params_end),
        std::move(islands), rank, metrics_);
    compute::OuterStep& outer = outer_->outer();
    held_.push_back({"outer_sync", params_begin, params_end, outer.last_sync().data_as<float>(), writes_params});
    held_.push_back({"outer_momentum", params_begin, params_end, outer.momentum().data_as<float>(), writes_params});
    layout_ += outer_->describe(place_.grid.dp / count);
  }
  // Compression state lives in host memory (compression runs on the CPU backend only).
  for (const compute::DataParallel::SumState& state : trainer_.data_parallel().sum_state) {
    TROUPE_CHECK(state.values.device() == compute::Device::cpu && state.values.dtype() == compute::DType::f32,
                 "gradient-sum state '" + state.kind + "' is not f32 host memory");
    if (experts.sharded()) {
      add_expert_shard_state(held_, model_.stage(), state, rank, experts.shards(), other_experts_state_);
      continue;
    }
    held_.push_back({state.kind, 0, state.values.numel(), state.values.data_as<float>(),
                     state.replicated ? writes_params : true, false, true});
  }
}

void ReplicaLoop::record_into(monitor::TraceRecorder& recorder) {
  if (!outer_) return;
  trace_ = &recorder;
  const int rank = place_.rank;
  recorder.name_process(rank, fmt::format("rank {} (island {})", rank, island_));
  recorder.name_track({rank, 0}, "inner steps");
  outer_->record_into(recorder, {rank, 1}, "outer syncs");
}

compute::StepResult ReplicaLoop::step() {
  const double step_start_us = trace_ ? monitor::trace_clock_us() : 0;
  compute::StepResult result = trainer_.step();
  if (trace_)
    trace_->add_complete({place_.rank, 0}, fmt::format("step {}", result.step + 1), "compute", step_start_us,
                         monitor::trace_clock_us() - step_start_us, {{"loss", fmt::format("{:.4f}", result.loss)}});
  if (metrics_ && result.micro_batch_seconds > 0) {
    metrics_->set_batch_share(result.batch_share);
    metrics_->set_micro_batch_seconds(result.micro_batch_seconds);
  }
  if (result.shares_resumed && !result.shares_changed && place_.rank == 0) {
    // "balance dynamic: step 11: replica shares 4, 4 of 8 micro-batches after a recovery (…)"
    const std::vector<int>& shares = trainer_.micro_shares();
    monitor::logger("train")->info(
        "balance dynamic: step {}: replica shares {} of {} micro-batches after a recovery (the survivors' measured "
        "speeds, a new replica at their mean)",
        result.step + 1, compute::shares_text(shares), std::accumulate(shares.begin(), shares.end(), 0));
  }
  if (result.shares_changed && place_.rank == 0)
    log_share_change(result, trainer_.micro_shares(), trainer_.seconds_per_micro_batch());
  if (outer_) outer_->after_step(trainer_.steps_taken(), model_.params(), result);
  return result;
}

void ReplicaLoop::resplit(const compute::BatchSplit& split) {
  TROUPE_CHECK(place_.writers == 1 && split.dp_rank == place_.rank, "a replica that grows in place keeps its rank");
  trainer_.resplit(split);
  place_.grid.dp = split.dp_size;
  layout_ = replica_layout(split.dp_size, split.batch_size, trainer_.seq_len(), split.grad_accum);
}

double ReplicaLoop::param_norm() {
  // Under ZeRO-3 each element is kept by one rank of the group, expert shards or not.
  if (model_.stage().expert_group().sharded() && !sharded_)
    return std::sqrt(
        compute::ExpertGradients(model_.stage()).squares(backend_, trainer_.data_parallel(), model_.params()));
  const double squares = backend_.sum_of_squares(model_.params());
  return std::sqrt(sharded_ && sum_over_group_ ? sum_over_group_(squares) : squares);
}

void ReplicaLoop::mirror_to_host() {
  if (backend_.device() == compute::Device::cpu) return;
  for (std::size_t i = 0; i < state_.size(); ++i) backend_.copy(mirrors_[i], *state_[i]);
}

void ReplicaLoop::mirror_to_device() {
  // A restore read other ranks' residuals into it; this rank holds none of theirs.
  float* others = other_experts_state_.defined() ? other_experts_state_.data_as<float>() : nullptr;
  std::fill(others, others + (others ? other_experts_state_.numel() : 0), 0.0f);
  if (backend_.device() == compute::Device::cpu) return;
  for (std::size_t i = 0; i < state_.size(); ++i) backend_.copy(*state_[i], mirrors_[i]);
}

}  // namespace troupe::actors
