#pragma once
// Autoregressive sampling from a GPT. Each new token runs a forward pass over the last
// block_size tokens (no KV cache: generation is a short demo at the end of training, and this
// keeps one forward path for training and sampling).

#include <cstdint>
#include <functional>
#include <vector>

#include "compute/model/gpt.hpp"

namespace troupe::compute {

struct SamplingOptions {
  int tokens = 200;
  double temperature = 1.0;  // > 0
  int top_k = 0;             // 0 = sample from all tokens
  std::uint64_t seed = 0;
};

// Returns only the new tokens. `on_token` (optional) sees each one as it is drawn.
std::vector<int> generate(GPT& model, const std::vector<int>& prompt, const SamplingOptions& options,
                          const std::function<void(int)>& on_token = {});

}  // namespace troupe::compute
