// The kernels of the bf16 mode's attention, which runs its four products per head as batched
// cuBLAS GEMMs on bf16 tensor cores (CudaBackend::attention_*_bf16 in cuda_backend.cpp) and
// only the softmax here, in fp32. Heads are first copied out of qkv (B, T, 3C) into (B, NH, T, hs)
// bf16 buffers, so every (sequence, head) pair is one matrix at a fixed stride.
//   forward:  S = scale·Q Kᵀ (fp32);  P = exp(S - lse) on and below the diagonal, 0 above
//             (this file: lse, then P in bf16);  Y = P V (fp32), merged back into (B, T, C)
//   backward: S and dP = dO Vᵀ (fp32);  D = rowsum(P ∘ dP),  dS = P ∘ (dP - D)  (this file: P and
//             dS in bf16);  dV = Pᵀ dO,  dQ = scale·dS K,  dK = scale·dSᵀ Q, merged into dqkv
// lse is the flash kernels' state (attention.cu), so both paths keep the same (B, NH, T) tensor.
// The softmax kernels take one warp per score row, as LayerNorm does.

#include <cuda_bf16.h>

#include <cmath>

#include "compute/cuda/cuda_check.hpp"
#include "compute/cuda/kernels/kernels.hpp"
#include "compute/cuda/kernels/reduce.cuh"
#include "compute/cuda/launch_config.hpp"

namespace troupe::compute::cuda {
namespace {

// Element idx of a (B, NH, T, hs) buffer is row (b, t), column h·hs + d of a (B, T, ·) matrix.
struct HeadIndex {
  std::int64_t row;  // b·T + t
  int column;        // h·hs + d
  __device__ HeadIndex(std::int64_t idx, int T, int NH, int hs) {
    const int d = static_cast<int>(idx % hs);
    const std::int64_t bht = idx / hs;
    const int t = static_cast<int>(bht % T);
    const std::int64_t bh = bht / T;
    const int h = static_cast<int>(bh % NH);
    row = (bh / NH) * T + t;
    column = h * hs + d;
  }
};

__global__ void split_heads_kernel(__nv_bfloat16* q, __nv_bfloat16* k, __nv_bfloat16* v, const float* qkv, int T,
                                   int C, int NH, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const HeadIndex at(i, T, NH, C / NH);
    const float* src = qkv + at.row * 3 * C + at.column;
    q[i] = __float2bfloat16_rn(src[0]);
    k[i] = __float2bfloat16_rn(src[C]);
    v[i] = __float2bfloat16_rn(src[2 * C]);
  }
}

__global__ void heads_of_kernel(__nv_bfloat16* out, const float* x, int T, int C, int NH, std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const HeadIndex at(i, T, NH, C / NH);
    out[i] = __float2bfloat16_rn(x[at.row * C + at.column]);
  }
}

__global__ void merge_heads_kernel(float* out, std::int64_t ld, const float* heads, int T, int C, int NH,
                                   std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const HeadIndex at(i, T, NH, C / NH);
    out[at.row * ld + at.column] = heads[i];
  }
}

// Row r of S is query r % T of its pair; keys 0..i are seen.
__global__ void causal_softmax_kernel(__nv_bfloat16* P, float* lse, const float* S, std::int64_t rows, int T) {
  const std::int64_t row = blockIdx.x * std::int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const int i = static_cast<int>(row % T);
  const float* s = S + row * T;
  float m = -INFINITY;
  for (int j = lane; j <= i; j += kWarp) m = fmaxf(m, s[j]);
  m = warp_max(m);
  float sum = 0;
  for (int j = lane; j <= i; j += kWarp) sum += expf(s[j] - m);
  const float row_lse = m + logf(warp_sum(sum));
  __nv_bfloat16* p = P + row * T;
  for (int j = lane; j < T; j += kWarp) p[j] = __float2bfloat16_rn(j <= i ? expf(s[j] - row_lse) : 0.0f);
  if (lane == 0) lse[row] = row_lse;
}

__global__ void causal_softmax_backward_kernel(__nv_bfloat16* P, __nv_bfloat16* dS, float* D, const float* S,
                                               const float* dP, const float* lse, std::int64_t rows, int T) {
  const std::int64_t row = blockIdx.x * std::int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= rows) return;
  const int i = static_cast<int>(row % T);
  const float* s = S + row * T;
  const float* dp = dP + row * T;
  const float row_lse = lse[row];
  float dot = 0;
  for (int j = lane; j <= i; j += kWarp) dot += expf(s[j] - row_lse) * dp[j];
  dot = warp_sum(dot);
  __nv_bfloat16* p = P + row * T;
  __nv_bfloat16* ds = dS + row * T;
  for (int j = lane; j < T; j += kWarp) {
    const float pj = j <= i ? expf(s[j] - row_lse) : 0.0f;
    p[j] = __float2bfloat16_rn(pj);
    ds[j] = __float2bfloat16_rn(pj * (dp[j] - dot));
  }
  if (lane == 0) D[row] = dot;
}

auto* bf16(std::uint16_t* p) { return reinterpret_cast<__nv_bfloat16*>(p); }

}  // namespace

void attention_split_heads(std::uint16_t* q, std::uint16_t* k, std::uint16_t* v, const float* qkv, int B, int T, int C,
                           int NH, cudaStream_t stream) {
  const std::int64_t n = std::int64_t{B} * T * C;
  if (n == 0) return;
  split_heads_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(bf16(q), bf16(k), bf16(v), qkv, T, C,
                                                                                 NH, n);
  TROUPE_CUDA_LAUNCHED();
}

void attention_heads_of(std::uint16_t* out, const float* x, int B, int T, int C, int NH, cudaStream_t stream) {
  const std::int64_t n = std::int64_t{B} * T * C;
  if (n == 0) return;
  heads_of_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(bf16(out), x, T, C, NH, n);
  TROUPE_CUDA_LAUNCHED();
}

void attention_merge_heads(float* out, std::int64_t ld, const float* heads, int B, int T, int C, int NH,
                           cudaStream_t stream) {
  const std::int64_t n = std::int64_t{B} * T * C;
  if (n == 0) return;
  merge_heads_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(out, ld, heads, T, C, NH, n);
  TROUPE_CUDA_LAUNCHED();
}

void attention_causal_softmax(std::uint16_t* P, float* lse, const float* S, std::int64_t rows, int T,
                              cudaStream_t stream) {
  if (rows == 0) return;
  causal_softmax_kernel<<<row_blocks(rows), kRowsPerBlock * kWarp, 0, stream>>>(bf16(P), lse, S, rows, T);
  TROUPE_CUDA_LAUNCHED();
}

void attention_causal_softmax_backward(std::uint16_t* P, std::uint16_t* dS, float* D, const float* S, const float* dP,
                                       const float* lse, std::int64_t rows, int T, cudaStream_t stream) {
  if (rows == 0) return;
  causal_softmax_backward_kernel<<<row_blocks(rows), kRowsPerBlock * kWarp, 0, stream>>>(bf16(P), bf16(dS), D, S, dP,
                                                                                          lse, rows, T);
  TROUPE_CUDA_LAUNCHED();
}

}  // namespace troupe::compute::cuda
