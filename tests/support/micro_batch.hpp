#pragma once
// A micro-batch of tokens and targets drawn from a seed, for the tests that run a model's stage
// on micro-batches as a pipeline does.

#include <cstdint>

#include "compute/model/gpt_config.hpp"
#include "compute/random.hpp"
#include "compute/tensor.hpp"

namespace troupe::test {

struct MicroBatch {
  compute::Tensor tokens, targets;
};

// B × T tokens and targets below cfg.vocab_size, the same for the same seed.
inline MicroBatch micro_batch(const compute::GPTConfig& cfg, int B, int T, std::uint64_t seed) {
  using compute::DType;
  MicroBatch mb{compute::Tensor::zeros({B, T}, DType::i32), compute::Tensor::zeros({B, T}, DType::i32)};
  for (int i = 0; i < B * T; ++i) {
    mb.tokens.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(compute::hash_combine(seed, i) % cfg.vocab_size);
    mb.targets.data_as<std::int32_t>()[i] =
        static_cast<std::int32_t>(compute::hash_combine(seed + 1, i) % cfg.vocab_size);
  }
  return mb;
}

}  // namespace troupe::test
