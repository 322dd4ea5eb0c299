// Token + position embedding. Forward is one pass over (B, T, C). Backward adds dout into the
// rows of dwte its tokens name (atomics: a token repeated in the batch adds from several threads,
// so the order, and the last bits, may differ between runs) and into dwpe by a sum over the
// batch per (t, c), which is in order.

#include <cmath>

#include "compute/cuda/cuda_check.hpp"
#include "compute/cuda/kernels/kernels.hpp"
#include "compute/cuda/launch_config.hpp"

namespace troupe::compute::cuda {
namespace {

__global__ void encoder_forward_kernel(float* out, const std::int32_t* tokens, const float* wte, const float* wpe,
                                       int T, int C, int V, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int64_t bt = i / C;
    const int c = static_cast<int>(i % C), t = static_cast<int>(bt % T);
    const std::int32_t token = tokens[bt];
    out[i] = token >= 0 && token < V ? wte[std::int64_t{token} * C + c] + wpe[std::int64_t{t} * C + c] : NAN;
  }
}

__global__ void encoder_backward_wte_kernel(float* dwte, const float* dout, const std::int32_t* tokens, int C, int V,
                                            std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int32_t token = tokens[i / C];
    if (token >= 0 && token < V) atomicAdd(&dwte[std::int64_t{token} * C + i % C], dout[i]);
  }
}

__global__ void encoder_backward_wpe_kernel(float* dwpe, const float* dout, int B, int T, int C) {
  const std::int64_t n = std::int64_t{T} * C;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    float sum = 0;
    for (int b = 0; b < B; ++b) sum += dout[b * n + i];
    dwpe[i] += sum;
  }
}

}  // namespace

void encoder_forward(float* out, const std::int32_t* tokens, const float* wte, const float* wpe, int B, int T, int C,
                     int V, cudaStream_t stream) {
  const std::int64_t n = std::int64_t{B} * T * C;
  if (n == 0) return;
  encoder_forward_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(out, tokens, wte, wpe, T, C, V, n);
  TROUPE_CUDA_LAUNCHED();
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, int B, int T, int C,
                      int V, cudaStream_t stream) {
  const std::int64_t n = std::int64_t{B} * T * C;
  if (n == 0) return;
  encoder_backward_wte_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(dwte, dout, tokens, C, V, n);
  TROUPE_CUDA_LAUNCHED();
  encoder_backward_wpe_kernel<<<elementwise_blocks(std::int64_t{T} * C), kElementwiseThreads, 0, stream>>>(dwpe, dout,
                                                                                                        B, T, C);
  TROUPE_CUDA_LAUNCHED();
}

}  // namespace troupe::compute::cuda
