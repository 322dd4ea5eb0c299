#include "compute/train/trainer.hpp"

namespace troupe::compute {

Trainer::Trainer(GPT& model, TrainerOptions options, std::span<const std::uint16_t> train_tokens,
                 std::span<const std::uint16_t> val_tokens)
    : model_(model),
      options_(options),
      train_tokens_(train_tokens),
      val_tokens_(val_tokens),
      train_sampler_(train_tokens.size(), options.seq_len, options.seed),
      optimizer_(model.backend(), model.layout(), model.dtype(), options.adamw),
      inputs_(Tensor::zeros({options.batch_size, options.seq_len}, DType::i32)),
      targets_(Tensor::zeros({options.batch_size, options.seq_len}, DType::i32)) {
  TROUPE_CHECK(options.data_parallel.size == 1 || options.data_parallel.sum_gradients,
               "a data-parallel group of more than one rank needs sum_gradients");
  TROUPE_CHECK(0 <= options.data_parallel.rank && options.data_parallel.rank < options.data_parallel.size,
               "data-parallel rank outside its group");
  model_.reserve(options.batch_size, options.seq_len);
}

std::int64_t Trainer::tokens_per_step() const {
  return std::int64_t{options_.batch_size} * options_.seq_len * options_.grad_accum * options_.data_parallel.size;
}

StepResult Trainer::step() {
  const DataParallel& dp = options_.data_parallel;
  StepResult result;
  result.step = steps_;
  result.lr = options_.lr.at(steps_);
  model_.zero_grad();
  double loss_sum = 0;
  const int k = options_.grad_accum;
  for (int micro = 0; micro < k; ++micro) {
    const std::uint64_t micro_index = static_cast<std::uint64_t>(steps_) * k + micro;
    const std::uint64_t first = (micro_index * dp.size + dp.rank) * options_.batch_size;
    fill_batch(inputs_.data_as<std::int32_t>(), targets_.data_as<std::int32_t>(), train_tokens_, train_sampler_, first,
               options_.batch_size);
    loss_sum += model_.forward(inputs_, targets_);
    model_.backward(1.0 / (static_cast<double>(k) * dp.size));
  }
  if (dp.size > 1) dp.sum_gradients(model_.grads());
  result.loss = dp.mean ? dp.mean(loss_sum / k) : loss_sum / k;
  result.grad_norm = clip_grad_norm(model_.backend(), model_.grads(), options_.grad_clip);
  optimizer_.step(model_.params(), model_.grads(), result.lr);
  ++steps_;
  return result;
}

double Trainer::evaluate(int batches) {
  double sum = 0;
  for (int i = 0; i < batches; ++i) {
    fill_sequential_batch(inputs_.data_as<std::int32_t>(), targets_.data_as<std::int32_t>(), val_tokens_,
                          options_.seq_len, static_cast<std::uint64_t>(i) * options_.batch_size, options_.batch_size);
    sum += model_.forward(inputs_, targets_);
  }
  return batches > 0 ? sum / batches : 0.0;
}

}  // namespace troupe::compute
