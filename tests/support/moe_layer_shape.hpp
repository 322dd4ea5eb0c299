#pragma once
// The MoE layer the layer and expert-parallel tests run: N = 8 tokens of C = 4 channels, E = 4
// experts of width H = 8, top-2, and a shared expert; and zero gradients shaped like its weights.

#include <cstdint>

#include "compute/moe/moe_layer.hpp"
#include "compute/tensor.hpp"

namespace troupe::test::moe_layer_shape {

constexpr std::int64_t N = 8, C = 4, H = 8;
constexpr int E = 4, K = 2;

// Zeros shaped like each of `w`'s tensors; an undefined one (no shared expert) stays undefined.
inline compute::MoEWeights zeros_like(const compute::MoEWeights& w) {
  auto z = [](const compute::Tensor& t) {
    return t.defined() ? compute::Tensor::zeros(t.shape(), t.dtype()) : compute::Tensor{};
  };
  return {z(w.router),      z(w.fc_w),        z(w.fc_b),          z(w.proj_w),       z(w.proj_b),
          z(w.shared_fc_w), z(w.shared_fc_b), z(w.shared_proj_w), z(w.shared_proj_b)};
}

}  // namespace troupe::test::moe_layer_shape
