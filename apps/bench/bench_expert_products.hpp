#pragma once
// The experts' products of one MoE block on the CPU backend with the machine's threads, for troupe
// bench moe: as the grouped products the model runs (Backend::grouped_matmul_*: all the experts in
// one run of the backend's team) and as one product per expert with rows (Backend's default, each
// product split among OpenBLAS' threads), in alternation on the same tensors.

#include <cstdint>
#include <vector>

#include "compute/model/gpt_config.hpp"

namespace troupe::apps {

struct ExpertProductTimes {
  double grouped_s = 0;     // medians of one block's six products: c_fc and c_proj forward, both
  double per_expert_s = 0;  // input gradients and both weight gradients
};

// rows_of[e]: expert e's token-slots (cfg.experts counts).
ExpertProductTimes time_expert_products(const compute::GPTConfig& cfg, int threads,
                                        const std::vector<std::int64_t>& rows_of, int iterations);

}  // namespace troupe::apps
