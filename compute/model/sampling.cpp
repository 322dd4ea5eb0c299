#include "compute/model/sampling.hpp"

#include <algorithm>
#include <cmath>

#include "compute/random.hpp"

namespace troupe::compute {
namespace {

// Draws from softmax(logits / temperature) restricted to the top_k largest logits.
int sample_token(std::vector<double> logits, const SamplingOptions& options, std::uint64_t draw) {
  const int V = static_cast<int>(logits.size());
  if (options.top_k > 0 && options.top_k < V) {
    std::vector<double> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + (options.top_k - 1), sorted.end(), std::greater<>());
    double threshold = sorted[static_cast<std::size_t>(options.top_k - 1)];
    for (auto& l : logits)
      if (l < threshold) l = -INFINITY;
  }
  double max_logit = *std::max_element(logits.begin(), logits.end());
  double total = 0;
  for (auto& l : logits) {
    l = std::exp((l - max_logit) / options.temperature);
    total += l;
  }
  double u = uniform_open0(splitmix64(hash_combine(options.seed, draw))) * total;
  for (int i = 0; i < V; ++i) {
    u -= logits[static_cast<std::size_t>(i)];
    if (u <= 0) return i;
  }
  return V - 1;
}

}  // namespace

std::vector<int> generate(GPT& model, const std::vector<int>& prompt, const SamplingOptions& options,
                          const std::function<void(int)>& on_token) {
  TROUPE_CHECK(!prompt.empty(), "generation needs at least one prompt token");
  TROUPE_CHECK(options.temperature > 0, "sampling temperature must be positive");
  const GPTConfig& cfg = model.config();
  model.reserve(1, cfg.block_size);
  std::vector<int> context = prompt, produced;
  Tensor host_logits = Tensor::zeros({cfg.padded_vocab_size}, model.dtype());
  for (int n = 0; n < options.tokens; ++n) {
    const int T = std::min<int>(static_cast<int>(context.size()), cfg.block_size);
    Tensor tokens = Tensor::zeros({1, T}, DType::i32);
    std::copy(context.end() - T, context.end(), tokens.data_as<std::int32_t>());
    model.forward(tokens);
    model.backend().copy(
        host_logits, model.last_logits().slice(std::int64_t{T - 1} * cfg.padded_vocab_size, {cfg.padded_vocab_size}));
    std::vector<double> logits(static_cast<std::size_t>(cfg.vocab_size));
    for (int i = 0; i < cfg.vocab_size; ++i)
      logits[static_cast<std::size_t>(i)] =
          model.dtype() == DType::f32 ? host_logits.data_as<float>()[i] : host_logits.data_as<double>()[i];
    int next = sample_token(std::move(logits), options, static_cast<std::uint64_t>(n));
    context.push_back(next);
    produced.push_back(next);
    if (on_token) on_token(next);
  }
  return produced;
}

}  // namespace troupe::compute
