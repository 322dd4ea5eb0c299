// Softmax cross-entropy over the first V of Vp logit columns, one block per row (as
// crossentropy.cpp): the row's max, the sum of exp(x - max), then the probabilities, with the
// padded columns 0. The loss is log(sum) - (x[target] - max), finite when p[target] underflows.
// probs may be logits: the target logit is read before the block's last barrier, and every
// write comes after it.

#include <cmath>

#include "compute/cuda/cuda_check.hpp"
#include "compute/cuda/kernels/kernels.hpp"
#include "compute/cuda/kernels/reduce.cuh"
#include "compute/cuda/launch_config.hpp"

namespace troupe::compute::cuda {
namespace {

struct Max {
  __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct Plus {
  __device__ float operator()(float a, float b) const { return a + b; }
};

__global__ void crossentropy_forward_kernel(float* losses, float* probs, const float* logits,
                                            const std::int32_t* targets, int V, int Vp) {
  __shared__ float shared[kCrossEntropyThreads / kWarp];
  const std::int64_t row = blockIdx.x;
  const float* x = logits + row * Vp;
  float* p = probs + row * Vp;
  float max = -INFINITY;
  for (int j = threadIdx.x; j < V; j += blockDim.x) max = fmaxf(max, x[j]);
  max = block_reduce(max, shared, Max{});
  const std::int32_t target = targets[row];
  const float target_shifted = target >= 0 && target < V ? x[target] - max : NAN;
  float sum = 0;
  for (int j = threadIdx.x; j < V; j += blockDim.x) sum += expf(x[j] - max);
  sum = block_reduce(sum, shared, Plus{});
  const float inv = 1.0f / sum;
  for (int j = threadIdx.x; j < Vp; j += blockDim.x) p[j] = j < V ? expf(x[j] - max) * inv : 0.0f;
  if (threadIdx.x == 0) losses[row] = logf(sum) - target_shifted;
}

__global__ void crossentropy_backward_kernel(float* dlogits, const float* probs, const std::int32_t* targets,
                                             float dloss, int Vp, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t row = i / Vp;
    const int j = static_cast<int>(i % Vp);
    dlogits[i] = probs[i] * dloss - (j == targets[row] ? dloss : 0.0f);
  }
}

}  // namespace

void crossentropy_forward(float* losses, float* probs, const float* logits, const std::int32_t* targets,
                          std::int64_t N, int V, int Vp, cudaStream_t stream) {
  if (N == 0) return;
  crossentropy_forward_kernel<<<static_cast<unsigned>(N), kCrossEntropyThreads, 0, stream>>>(losses, probs, logits,
                                                                                             targets, V, Vp);
  TROUPE_CUDA_LAUNCHED();
}

void crossentropy_backward(float* dlogits, const float* probs, const std::int32_t* targets, float dloss,
                           std::int64_t N, int Vp, cudaStream_t stream) {
  const std::int64_t n = N * Vp;
  if (n == 0) return;
  crossentropy_backward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(dlogits, probs, targets,
                                                                                          dloss, Vp, n);
  TROUPE_CUDA_LAUNCHED();
}

}  // namespace troupe::compute::cuda
