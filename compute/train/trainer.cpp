#include "compute/train/trainer.hpp"

#include <cmath>

#include "compute/memory_ledger.hpp"

namespace troupe::compute {
namespace {

// A micro-batch's token ids, counted with the activations.
Tensor batch_tensor(const TrainerOptions& options) {
  MemoryScope scope(MemoryKind::activations);
  return Tensor::zeros({options.batch_size, options.seq_len}, DType::i32);
}

}  // namespace

Trainer::Trainer(GPT& model, TrainerOptions options, std::span<const std::uint16_t> train_tokens,
                 std::span<const std::uint16_t> val_tokens)
    : model_(model),
      options_(options),
      train_tokens_(train_tokens),
      val_tokens_(val_tokens),
      train_sampler_(train_tokens.size(), options.seq_len, options.seed),
      optimizer_(model.backend(), model.layout(), model.dtype(), options.adamw, options.data_parallel.shard_begin,
                 options.data_parallel.shard_end < 0 ? model.layout().total() : options.data_parallel.shard_end,
                 model.kept_begin()),
      inputs_(batch_tensor(options)),
      targets_(batch_tensor(options)),
      micro_batches_(model.backend(), model.grads(),
                     shards_parameters(options.data_parallel.zero_stage) ? 1 : options.grad_accum) {
  const DataParallel& dp = options.data_parallel;
  if (shards_parameters(dp.zero_stage)) {
    const std::int64_t shard_end = dp.shard_end < 0 ? model.layout().total() : dp.shard_end;
    TROUPE_CHECK(dp.sharded && model.kept_begin() == dp.shard_begin &&
                     model.kept_begin() + model.params().numel() == shard_end && (dp.size == 1 || dp.sum),
                 "ZeRO-3 needs a model whose source keeps this rank's shard, and a scalar sum");
  } else {
    TROUPE_CHECK(model.params().numel() == model.layout().total(), "only ZeRO-3 shards the model's parameters");
    TROUPE_CHECK(dp.size == 1 || (shards_gradients(dp.zero_stage) ? dp.reduce_scatter_gradients && dp.sum
                                                                  : static_cast<bool>(dp.sum_gradients)),
                 "a data-parallel group of more than one rank needs its gradient reduction");
    TROUPE_CHECK(!gathers_parameters(dp.zero_stage) || dp.all_gather_parameters || dp.size == 1,
                 "ZeRO needs all_gather_parameters");
  }
  TROUPE_CHECK(0 <= options.data_parallel.rank && options.data_parallel.rank < options.data_parallel.size,
               "data-parallel rank outside its group");
  model_.reserve(options.batch_size, options.seq_len);
}

void Trainer::resume_at(long steps) {
  steps_ = steps;
  optimizer_.set_steps_taken(steps);
}

void Trainer::abandon_step() {
  const DataParallel& dp = options_.data_parallel;
  if (dp.abandon_sums) dp.abandon_sums();
  if (dp.sharded) dp.sharded->abandon_step();
}

void Trainer::resplit(const BatchSplit& split) {
  DataParallel& dp = options_.data_parallel;
  TROUPE_CHECK(!shards_optimizer_state(dp.zero_stage),
               "only ZeRO 0 resplits its batch: every rank holds the whole state");
  TROUPE_CHECK(0 <= split.dp_rank && split.dp_rank < split.dp_size && split.grad_accum >= 1 && split.batch_size >= 1,
               "a batch split outside its group");
  TROUPE_CHECK(std::int64_t{split.batch_size} * split.grad_accum * split.dp_size ==
                   std::int64_t{options_.batch_size} * options_.grad_accum * dp.size,
               "a resplit that changes the global batch");
  TROUPE_CHECK(split.dp_size == 1 || dp.sum_gradients, "a data-parallel group of more than one rank needs its gradient reduction");
  dp.rank = split.dp_rank;
  dp.size = split.dp_size;
  options_.grad_accum = split.grad_accum;
  if (split.batch_size != options_.batch_size) {
    options_.batch_size = split.batch_size;
    inputs_ = batch_tensor(options_);
    targets_ = batch_tensor(options_);
    model_.reserve(options_.batch_size, options_.seq_len);
  }
  micro_batches_ = MicroBatchSum(model_.backend(), model_.grads(), options_.grad_accum);
}

std::int64_t Trainer::tokens_per_step() const {
  return std::int64_t{options_.batch_size} * options_.seq_len * options_.grad_accum * options_.data_parallel.size;
}

StepResult Trainer::step() {
  const DataParallel& dp = options_.data_parallel;
  const bool overlap = dp.size > 1 && !shards_optimizer_state(dp.zero_stage) && dp.start_sum;
  std::function<void(int)> between_layers;
  if (dp.between_layers) between_layers = [&](int) { dp.between_layers(); };
  const std::function<void(int)> start_layer_bucket = [&](int layer) {
    if (dp.between_layers) dp.between_layers();
    const auto [begin, end] = model_.layout().layer_range(layer);
    micro_batches_.add_earlier(begin, end);
    dp.start_sum(model_.grads().slice(begin, {end - begin}), begin);
  };
  StepResult result;
  result.step = steps_;
  result.lr = options_.lr.at(steps_);
  if (dp.begin_step) dp.begin_step(steps_);
  model_.zero_grad();
  double loss_sum = 0;
  const int k = options_.grad_accum;
  for (int micro = 0; micro < k; ++micro) {
    micro_batches_.before_backward(micro);
    const std::uint64_t micro_index = static_cast<std::uint64_t>(steps_) * k + micro;
    const std::uint64_t first = (micro_index * dp.size + dp.rank) * options_.batch_size;
    fill_batch(inputs_.data_as<std::int32_t>(), targets_.data_as<std::int32_t>(), train_tokens_, train_sampler_, first,
               options_.batch_size);
    loss_sum += model_.forward(inputs_, targets_, between_layers);
    const bool last_micro = micro == k - 1;
    model_.backward(1.0 / (static_cast<double>(k) * dp.size), last_micro && overlap ? start_layer_bucket : between_layers);
  }
  const bool sharded_gradients = dp.size > 1 && shards_gradients(dp.zero_stage);
  if (shards_parameters(dp.zero_stage)) {
    dp.sharded->finish_gradients();
  } else if (overlap) {
    // The buckets backward did not cover: the embeddings at the front of the buffer, ln_f at the end.
    const auto [first_layer_begin, first_layer_end] = model_.layout().layer_range(0);
    const auto [last_layer_begin, last_layer_end] = model_.layout().layer_range(model_.config().n_layer - 1);
    micro_batches_.add_earlier(0, first_layer_begin);
    micro_batches_.add_earlier(last_layer_end, model_.layout().total());
    dp.start_sum(model_.grads().slice(0, {first_layer_begin}), 0);
    dp.start_sum(model_.grads().slice(last_layer_end, {model_.layout().total() - last_layer_end}), last_layer_end);
    dp.wait_sums();
  } else {
    micro_batches_.add_earlier();
    if (sharded_gradients)
      dp.reduce_scatter_gradients(model_.grads());
    else if (dp.size > 1)
      dp.sum_gradients(model_.grads());
  }
  result.loss = dp.mean ? dp.mean(loss_sum / k) : loss_sum / k;
  result.grad_norm = sharded_gradients ? clip_sharded_gradients()
                                       : clip_grad_norm(model_.backend(), model_.grads(), options_.grad_clip);
  optimizer_.step(model_.params(), model_.grads(), result.lr);
  if (dp.size > 1 && gathers_parameters(dp.zero_stage)) dp.all_gather_parameters(model_.params());
  ++steps_;
  return result;
}

Tensor Trainer::gradient_shard() {
  const DataParallel& dp = options_.data_parallel;
  if (shards_parameters(dp.zero_stage)) return model_.grads();
  const std::int64_t end = dp.shard_end < 0 ? model_.layout().total() : dp.shard_end;
  return model_.grads().slice(dp.shard_begin, {end - dp.shard_begin});
}

double Trainer::clip_sharded_gradients() {
  const DataParallel& dp = options_.data_parallel;
  Tensor shard = gradient_shard();
  const double norm = std::sqrt(dp.sum(model_.backend().sum_of_squares(shard)));
  scale_to_norm(model_.backend(), shard, norm, options_.grad_clip);
  return norm;
}

double Trainer::evaluate(int batches) {
  double sum = 0;
  for (int i = 0; i < batches; ++i) {
    fill_sequential_batch(inputs_.data_as<std::int32_t>(), targets_.data_as<std::int32_t>(), val_tokens_,
                          options_.seq_len, static_cast<std::uint64_t>(i) * options_.batch_size, options_.batch_size);
    sum += model_.forward(inputs_, targets_);
  }
  if (options_.data_parallel.sharded) options_.data_parallel.sharded->release_all();
  return batches > 0 ? sum / batches : 0.0;
}

}  // namespace troupe::compute
