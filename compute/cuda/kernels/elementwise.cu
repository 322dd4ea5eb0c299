// Elementwise kernels: GELU (the CPU backend's formulation, gelu.cpp), the residual add, scaling,
// the bias rows under a GEMM and the fp32 → bf16 rounding of GEMM operands. All grid-stride loops.

#include <cuda_bf16.h>

#include "compute/cuda/cuda_check.hpp"
#include "compute/cuda/kernels/kernels.hpp"
#include "compute/cuda/launch_config.hpp"

namespace troupe::compute::cuda {
namespace {

constexpr float kSqrt2OverPi = 0.79788456080286535588f;
constexpr float kCubic = 0.044715f;

// Runs f(i) for every i < n.
template <typename F>
__global__ void for_each_kernel(std::int64_t n, F f) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    f(i);
}

template <typename F>
void for_each(std::int64_t n, cudaStream_t stream, F f) {
  if (n == 0) return;
  for_each_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(n, f);
  TROUPE_CUDA_LAUNCHED();
}

struct GeluForward {
  float* out;
  const float* inp;
  __device__ void operator()(std::int64_t i) const {
    const float x = inp[i];
    const float u = kSqrt2OverPi * (x + kCubic * x * x * x);
    out[i] = x / (1.0f + expf(-2.0f * u));
  }
};

struct GeluBackward {
  float* dinp;
  const float* inp;
  const float* dout;
  __device__ void operator()(std::int64_t i) const {
    const float x = inp[i], x2 = x * x;
    const float u = kSqrt2OverPi * (x + kCubic * x2 * x);
    const float du = kSqrt2OverPi * (1.0f + 3.0f * kCubic * x2);
    const float e = expf(-2.0f * u);
    const float s = 1.0f / (1.0f + e);
    dinp[i] = dout[i] * (s + 2.0f * x * s * (e * s) * du);
  }
};

struct Residual {
  float* out;
  const float* a;
  const float* b;
  __device__ void operator()(std::int64_t i) const { out[i] = a[i] + b[i]; }
};

struct Scale {
  float* x;
  float factor;
  __device__ void operator()(std::int64_t i) const { x[i] *= factor; }
};

struct ToBf16 {
  __nv_bfloat16* out;
  const float* in;
  __device__ void operator()(std::int64_t i) const { out[i] = __float2bfloat16_rn(in[i]); }
};

struct BroadcastRows {
  float* out;
  const float* bias;
  int OC;
  __device__ void operator()(std::int64_t i) const { out[i] = bias[i % OC]; }
};

}  // namespace

void broadcast_rows(float* out, const float* bias, std::int64_t N, int OC, cudaStream_t stream) {
  for_each(N * OC, stream, BroadcastRows{out, bias, OC});
}

void gelu_forward(float* out, const float* inp, std::int64_t n, cudaStream_t stream) {
  for_each(n, stream, GeluForward{out, inp});
}

void gelu_backward(float* dinp, const float* inp, const float* dout, std::int64_t n, cudaStream_t stream) {
  for_each(n, stream, GeluBackward{dinp, inp, dout});
}

void residual_forward(float* out, const float* a, const float* b, std::int64_t n, cudaStream_t stream) {
  for_each(n, stream, Residual{out, a, b});
}

void scale(float* x, std::int64_t n, float factor, cudaStream_t stream) { for_each(n, stream, Scale{x, factor}); }

void to_bf16(std::uint16_t* out, const float* in, std::int64_t n, cudaStream_t stream) {
  for_each(n, stream, ToBf16{reinterpret_cast<__nv_bfloat16*>(out), in});
}

}  // namespace troupe::compute::cuda
