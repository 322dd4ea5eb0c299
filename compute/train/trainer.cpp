#include "compute/train/trainer.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "compute/context/context_split.hpp"
#include "compute/memory_ledger.hpp"

namespace troupe::compute {
namespace {

// Token ids of up to `sequences` sequences, counted with the activations.
Tensor batch_tensor(const TrainerOptions& options, int sequences) {
  MemoryScope scope(MemoryKind::activations);
  return Tensor::zeros({sequences, options.seq_len}, DType::i32);
}

// The whole model as the one flat buffer ZeRO shards, with the shard the group gave this rank.
std::vector<ZeroStep::Buffer> whole_model(GPT& model, const DataParallel& dp) {
  const std::int64_t total = model.layout().total();
  return {{model.layout().views(), total, model.params(), model.grads(), model.kept_begin(), dp.shard_begin,
           dp.shard_end < 0 ? total : dp.shard_end, dp.sharded, 0}};
}

}  // namespace

Trainer::Trainer(GPT& model, TrainerOptions options, std::span<const std::uint16_t> train_tokens,
                 std::span<const std::uint16_t> val_tokens)
    : model_(model),
      options_(options),
      train_tokens_(train_tokens),
      val_tokens_(val_tokens),
      train_sampler_(train_tokens.size(), options.seq_len, options.seed),
      experts_(model.stage()),
      lone_experts_{0, 1, options_.data_parallel.zero_stage},
      zero_(model.backend(), options_.data_parallel, model.dtype(), options.adamw, zero_buffers()),
      inputs_(batch_tensor(options, pass_sequences())),
      targets_(batch_tensor(options, pass_sequences())),
      micro_batches_(model.backend(), model.grads(), micro_batch_capacity()) {
  TROUPE_CHECK(0 <= options.data_parallel.rank && options.data_parallel.rank < options.data_parallel.size,
               "data-parallel rank outside its group");
  TROUPE_CHECK(0 <= options.island && options.island < options.islands, "an island outside the islands");
  model_.stage().set_moe_loss_coefficients(options.moe_aux_coef, options.moe_z_coef);
  TROUPE_CHECK(!experts_.sharded() ||
                   (options.islands == 1 && options.data_parallel.size % model_.stage().expert_group().shards() == 0),
               "expert shards under DiLoCo, or over a data-parallel group they do not divide");
  const ContextShardGroup context = model_.stage().context_shard();
  int rows = options.seq_len;
  if (context.sharded()) {
    TROUPE_CHECK(context.split.T == options.seq_len && options.data_parallel.size % context.split.shards == 0 &&
                     options.data_parallel.rank % context.split.shards == context.rank(),
                 "context shards that are not consecutive ranks of the data-parallel group");
    rows = context.split.local_rows();
    MemoryScope scope(MemoryKind::activations);
    rows_in_ = Tensor::zeros({pass_sequences(), rows}, DType::i32);
    rows_target_ = Tensor::zeros({pass_sequences(), rows}, DType::i32);
  }
  model_.reserve(pass_sequences(), rows);
  if (!options.micro_shares.empty()) {
    TROUPE_CHECK(!share_in_one_pass() || model_.config().experts == 0,
                 "uneven shares under ZeRO-3 on a model with experts (its routing losses are per batch)");
    TROUPE_CHECK(static_cast<int>(options.micro_shares.size()) == data_replicas() &&
                     first_unit(options.micro_shares, data_replicas()) == options.grad_accum * data_replicas() &&
                     *std::min_element(options.micro_shares.begin(), options.micro_shares.end()) >= 1,
                 "uneven shares that are not the group's global batch");
    TROUPE_CHECK(options.data_parallel.size == 1 || options.data_parallel.sum, "uneven shares without a scalar sum");
  }
  if (options.balance_window > 0) {
    TROUPE_CHECK(!options.micro_shares.empty() && (options.data_parallel.size == 1 || options.data_parallel.sum_values),
                 "dynamic shares without starting shares or a sum of several scalars");
    dynamic_.emplace(options.micro_shares, options.balance_window);
  }
}

bool Trainer::share_in_one_pass() const {
  return shards_parameters(options_.data_parallel.zero_stage) && !options_.micro_shares.empty();
}

int Trainer::pass_sequences() const {
  if (!share_in_one_pass()) return options_.batch_size;
  const auto replicas = static_cast<int>(options_.micro_shares.size());
  const int most = options_.balance_window > 0
                       ? options_.grad_accum * replicas - replicas + 1
                       : *std::max_element(options_.micro_shares.begin(), options_.micro_shares.end());
  return most * options_.batch_size;
}

int Trainer::micro_batch_capacity() const {
  const DataParallel& dp = options_.data_parallel;
  if (shards_parameters(dp.zero_stage)) return 1;
  if (options_.balance_window > 0) return options_.grad_accum * data_replicas() - data_replicas() + 1;
  return own_micro_batches();
}

std::vector<ZeroStep::Buffer> Trainer::zero_buffers() {
  const DataParallel& dp = options_.data_parallel;
  if (!experts_.sharded() || dp.zero_stage == ZeroStage::none) return whole_model(model_, dp);
  return experts_.zero_buffers(model_.layout().views(), model_.params(), model_.grads(), dp,
                               dp.expert_data ? *dp.expert_data : lone_experts_, 0);
}

double Trainer::gradient_squares() const {
  const DataParallel& dp = options_.data_parallel;
  Backend& backend = model_.backend();
  // Below ZeRO-2 every rank holds its whole buffer summed.
  if (experts_.sharded() && !shards_gradients(dp.zero_stage)) return experts_.squares(backend, dp, model_.grads());
  double squares = 0;
  for (int b = 0; b < zero_.buffers(); ++b) squares += backend.sum_of_squares(zero_.summed_gradients(b));
  return zero_.group_squares(squares);
}

int Trainer::data_rank() const {
  const ContextShardGroup context = model_.stage().context_shard();
  return options_.data_parallel.rank / (context.sharded() ? context.split.shards : 1);
}

bool Trainer::times_replica() const {
  const ContextShardGroup context = model_.stage().context_shard();
  return !context.sharded() || context.rank() == 0;
}

int Trainer::data_replicas() const {
  const ContextShardGroup context = model_.stage().context_shard();
  return options_.data_parallel.size / (context.sharded() ? context.split.shards : 1);
}

Tensor Trainer::own_rows(const Tensor& batch, int sequences, Tensor& rows) const {
  const ContextShardGroup context = model_.stage().context_shard();
  if (!context.sharded()) return batch.rows(0, sequences);
  context::take_rows(rows.data_as<std::int32_t>(), batch.data_as<std::int32_t>(), sequences, 1, context.split,
                     context.rank());
  return rows.rows(0, sequences);
}

int Trainer::own_micro_batches() const {
  return options_.micro_shares.empty() ? options_.grad_accum
                                       : options_.micro_shares[static_cast<std::size_t>(data_rank())];
}

std::uint64_t Trainer::first_sample(int micro) const {
  const int R = data_replicas();
  const int unit =
      options_.micro_shares.empty() ? micro * R + data_rank() : first_unit(options_.micro_shares, data_rank()) + micro;
  return unit_first_sample(steps_, options_.grad_accum * R, R, unit, options_.island, options_.islands,
                           options_.batch_size);
}

void Trainer::resume_at(long steps) {
  steps_ = steps;
  zero_.resume_at(steps);
  // Every rank of a recovery or a resumed job resumes: their next step first agrees on the shares.
  resume_shares_ = dynamic_.has_value();
}

void Trainer::abandon_step() { zero_.abandon_step(); }

bool Trainer::resume_shares() {
  // Each replica's measured time per micro-batch in its slot (a replacement, made anew, has none:
  // 0), summed over the group as the step's loss carries them: every rank then holds the same numbers.
  std::vector<double> values(options_.micro_shares.size(), 0.0);
  const std::vector<double>& measured = dynamic_->seconds_per_micro_batch();
  const auto replica = static_cast<std::size_t>(data_rank());
  if (replica < measured.size() && times_replica()) values[replica] = measured[replica];
  const DataParallel& dp = options_.data_parallel;
  if (dp.sum_values) dp.sum_values(values);
  const bool from_measured = dynamic_->resume(values);
  options_.micro_shares = dynamic_->shares();
  return from_measured;
}

std::vector<double> Trainer::seconds_per_micro_batch() const {
  return dynamic_ ? dynamic_->seconds_per_micro_batch() : std::vector<double>{};
}

double Trainer::sum_loss(double loss_sum, double seconds, StepResult& result) {
  const DataParallel& dp = options_.data_parallel;
  if (!dynamic_) return dp.sum ? dp.sum(loss_sum) : loss_sum;
  // One collective: the loss, then each replica's time per micro-batch in its slot (zero in the
  // others, so every rank's sum holds the same numbers exactly).
  std::vector<double> values(options_.micro_shares.size() + 1, 0.0);
  values[0] = loss_sum;
  if (times_replica()) values[1 + static_cast<std::size_t>(data_rank())] = seconds / own_micro_batches();
  if (dp.sum_values) dp.sum_values(values);
  result.shares_changed = dynamic_->observe(std::span<const double>(values).subspan(1));
  result.micro_batch_seconds = dynamic_->seconds_per_micro_batch()[static_cast<std::size_t>(data_rank())];
  return values[0];
}

void Trainer::resplit(const BatchSplit& split) {
  DataParallel& dp = options_.data_parallel;
  TROUPE_CHECK(!shards_optimizer_state(dp.zero_stage),
               "only ZeRO 0 resplits its batch: every rank holds the whole state");
  TROUPE_CHECK(!model_.stage().context_shard().sharded(), "a resplit under context shards");
  TROUPE_CHECK(0 <= split.dp_rank && split.dp_rank < split.dp_size && split.grad_accum >= 1 && split.batch_size >= 1,
               "a batch split outside its group");
  TROUPE_CHECK(std::int64_t{split.batch_size} * split.grad_accum * split.dp_size ==
                   std::int64_t{options_.batch_size} * options_.grad_accum * dp.size,
               "a resplit that changes the global batch");
  TROUPE_CHECK(split.dp_size == 1 || (dp.start_sum && dp.wait_sums),
               "a data-parallel group of more than one rank needs its gradient reduction");
  dp.rank = split.dp_rank;
  dp.size = split.dp_size;
  options_.grad_accum = split.grad_accum;
  if (split.batch_size != options_.batch_size) {
    options_.batch_size = split.batch_size;
    inputs_ = batch_tensor(options_, pass_sequences());
    targets_ = batch_tensor(options_, pass_sequences());
    model_.reserve(options_.batch_size, options_.seq_len);
  }
  if (!options_.micro_shares.empty()) {
    std::vector<double> speeds = split.replica_speeds;
    if (speeds.empty()) speeds.assign(static_cast<std::size_t>(split.dp_size), 1.0);
    TROUPE_CHECK(static_cast<int>(speeds.size()) == split.dp_size, "a resplit's speeds for another number of replicas");
    Expected<std::vector<int>> shares = proportional_shares(split.grad_accum * split.dp_size, speeds);
    TROUPE_CHECK(shares.ok(), "a resplit's shares: " + (shares.ok() ? std::string() : shares.error().message));
    options_.micro_shares = std::move(*shares);
    if (dynamic_) dynamic_->regroup(options_.micro_shares);
  }
  micro_batches_ = MicroBatchSum(model_.backend(), model_.grads(), micro_batch_capacity());
}

std::int64_t Trainer::tokens_per_step() const {
  return std::int64_t{options_.batch_size} * options_.seq_len * options_.grad_accum * data_replicas() *
         options_.islands;
}

StepResult Trainer::step() {
  const DataParallel& dp = options_.data_parallel;
  const bool overlap = dp.size > 1 && !shards_optimizer_state(dp.zero_stage);
  std::function<void(int)> between_layers;
  if (dp.between_layers) between_layers = [&](int) { dp.between_layers(); };
  const std::function<void(int)> start_layer_bucket = [&](int layer) {
    if (dp.between_layers) dp.between_layers();
    const auto [begin, end] = model_.layout().layer_range(layer);
    micro_batches_.add_earlier(begin, end);
    experts_.start_sums(dp, model_.grads(), begin, end);
  };
  StepResult result;
  result.step = steps_;
  result.lr = options_.lr.at(steps_);
  if (resume_shares_) {
    resume_shares_ = false;
    result.shares_resumed = resume_shares();
  }
  if (dp.begin_step) dp.begin_step(steps_);
  model_.zero_grad();
  double loss_sum = 0;
  const int k = own_micro_batches();
  // Every micro-batch of the group's k·n weighs 1/(k·n) (with uneven shares k differs by replica,
  // their sum does not).
  const double group_micro_batches = static_cast<double>(options_.grad_accum) * dp.size;
  result.batch_share = k / (static_cast<double>(options_.grad_accum) * data_replicas());
  if (dp.sharded != nullptr) dp.sharded->take_waited_seconds();  // the waits of the passes below only
  const auto compute_start = std::chrono::steady_clock::now();
  if (share_in_one_pass()) {
    // ZeRO-3 gathers and reduce-scatters each unit in every forward and backward, a collective
    // every replica must enter as often as the others: the share's k micro-batches run as one
    // batch of k·B sequences, so a larger share makes each pass longer, never more passes. Each
    // micro-batch has B·T tokens, so the batch's mean loss is the mean of theirs.
    const std::int64_t window = std::int64_t{options_.batch_size} * options_.seq_len;
    for (int micro = 0; micro < k; ++micro)
      fill_batch(inputs_.data_as<std::int32_t>() + micro * window, targets_.data_as<std::int32_t>() + micro * window,
                 train_tokens_, train_sampler_, first_sample(micro), options_.batch_size);
    const int sequences = k * options_.batch_size;
    loss_sum = k * model_.forward(own_rows(inputs_, sequences, rows_in_), own_rows(targets_, sequences, rows_target_),
                                  between_layers);
    result.moe.add(model_.stage().moe_routing(0), 1.0);
    model_.backward(k / group_micro_batches, between_layers);
  } else {
    for (int micro = 0; micro < k; ++micro) {
      micro_batches_.before_backward(micro);
      fill_batch(inputs_.data_as<std::int32_t>(), targets_.data_as<std::int32_t>(), train_tokens_, train_sampler_,
                 first_sample(micro), options_.batch_size);
      loss_sum += model_.forward(own_rows(inputs_, options_.batch_size, rows_in_),
                                 own_rows(targets_, options_.batch_size, rows_target_), between_layers);
      result.moe.add(model_.stage().moe_routing(0), 1.0 / k);
      const bool last_micro = micro == k - 1;
      model_.backward(1.0 / group_micro_batches, last_micro && overlap ? start_layer_bucket : between_layers);
    }
  }
  // Under ZeRO-3 the passes wait for the other replicas' pieces of every unit: that is the others'
  // speed, not this replica's.
  const double compute_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - compute_start).count() -
      (dp.sharded != nullptr ? dp.sharded->take_waited_seconds() : 0.0);
  if (overlap) {
    // The buckets backward did not cover: the embeddings at the front of the buffer, ln_f at the end.
    const auto [first_layer_begin, first_layer_end] = model_.layout().layer_range(0);
    const auto [last_layer_begin, last_layer_end] = model_.layout().layer_range(model_.config().n_layer - 1);
    micro_batches_.add_earlier(0, first_layer_begin);
    micro_batches_.add_earlier(last_layer_end, model_.layout().total());
    experts_.start_sums(dp, model_.grads(), 0, first_layer_begin);
    experts_.start_sums(dp, model_.grads(), last_layer_end, model_.layout().total());
    dp.wait_sums();
  } else {
    micro_batches_.add_earlier();
    zero_.sum_gradients();
  }
  if (options_.micro_shares.empty())
    result.loss = dp.mean ? dp.mean(loss_sum / k) : loss_sum / k;
  else
    result.loss = sum_loss(loss_sum, compute_seconds, result) / group_micro_batches;
  result.grad_norm = std::sqrt(gradient_squares());
  zero_.clip(result.grad_norm, options_.grad_clip);
  zero_.update(result.lr);
  if (result.shares_changed) options_.micro_shares = dynamic_->shares();
  ++steps_;
  return result;
}

double Trainer::evaluate(int batches) {
  const DataParallel& dp = options_.data_parallel;
  // Under DiLoCo each island evaluates the set of all the islands' replicas, on its own weights.
  const int micro_batches = batches * options_.grad_accum * options_.islands;
  const std::uint64_t first = static_cast<std::uint64_t>(data_rank()) * micro_batches * options_.batch_size;
  double sum = 0;
  for (int i = 0; i < micro_batches; ++i) {
    fill_sequential_batch(inputs_.data_as<std::int32_t>(), targets_.data_as<std::int32_t>(), val_tokens_,
                          options_.seq_len, first + static_cast<std::uint64_t>(i) * options_.batch_size,
                          options_.batch_size);
    sum += model_.forward(own_rows(inputs_, options_.batch_size, rows_in_),
                          own_rows(targets_, options_.batch_size, rows_target_));
  }
  zero_.release_gathered();
  const double mean = micro_batches > 0 ? sum / micro_batches : 0.0;
  return dp.mean ? dp.mean(mean) : mean;
}

}  // namespace troupe::compute
