#pragma once
// A micro-batch of tokens and targets drawn from a seed, for the tests that run a model or its
// stages on micro-batches as a pipeline does.

#include <cstdint>

#include "compute/random.hpp"
#include "compute/tensor.hpp"

namespace troupe::test {

struct MicroBatch {
  compute::Tensor tokens, targets;
};

// B × T tokens and targets below `vocab`, the same for the same seed.
inline MicroBatch micro_batch(int B, int T, int vocab, std::uint64_t seed) {
  using compute::DType;
  MicroBatch mb{compute::Tensor::zeros({B, T}, DType::i32), compute::Tensor::zeros({B, T}, DType::i32)};
  for (int i = 0; i < B * T; ++i) {
    mb.tokens.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(compute::hash_combine(seed, i) % vocab);
    mb.targets.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(compute::hash_combine(seed + 1, i) % vocab);
  }
  return mb;
}

}  // namespace troupe::test
