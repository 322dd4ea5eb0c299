#pragma once
// A test model with experts: `dense` with 4 experts, top-2, and a shared expert in every block.

#include "compute/model/gpt_config.hpp"

namespace troupe::test {

inline compute::GPTConfig with_experts(compute::GPTConfig dense) {
  dense.experts = 4;
  dense.top_k = 2;
  dense.shared_experts = 1;
  return dense;
}

}  // namespace troupe::test
