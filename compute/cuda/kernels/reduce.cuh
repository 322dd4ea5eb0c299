#pragma once
// Warp and block reductions shared by the kernels (device code only).

#include "compute/cuda/launch_config.hpp"

namespace troupe::compute::cuda {

template <typename Real>
__device__ inline Real warp_sum(Real x) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

__device__ inline float warp_max(float x) {
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}

// Every thread of the block gets the result. `shared` holds one value per warp; the trailing
// barrier lets the caller run another reduction on the same array at once.
template <typename Real, typename Op>
__device__ inline Real block_reduce(Real x, Real* shared, Op op) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp, warps = (blockDim.x + kWarp - 1) / kWarp;
#pragma unroll
  for (int offset = kWarp / 2; offset > 0; offset /= 2) x = op(x, __shfl_xor_sync(0xffffffffu, x, offset));
  if (lane == 0) shared[warp] = x;
  __syncthreads();
  Real result = shared[0];
  for (int w = 1; w < warps; ++w) result = op(result, shared[w]);
  __syncthreads();
  return result;
}

}  // namespace troupe::compute::cuda
