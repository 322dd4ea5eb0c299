#pragma once
// Test models with experts: a dense one given 4 experts, top-2, and a shared expert in every block;
// the 3-block model the MoE recompute and split-backward tests run.

#include "compute/model/gpt_config.hpp"

namespace troupe::test {

inline compute::GPTConfig with_experts(compute::GPTConfig dense) {
  dense.experts = 4;
  dense.top_k = 2;
  dense.shared_experts = 1;
  return dense;
}

// 3 blocks of width 32, 4 experts top-2 in every moe_every-th block, `shared` shared experts.
inline compute::GPTConfig three_block_moe(int moe_every, int shared) {
  compute::GPTConfig cfg{3, 32, 4, 16, 64, 64};
  cfg.experts = 4;
  cfg.top_k = 2;
  cfg.moe_every = moe_every;
  cfg.shared_experts = shared;
  return cfg;
}

}  // namespace troupe::test
