#pragma once
// Deterministic column sums over the rows of a (N, C) matrix in two passes (launch_config.hpp):
// partials[chunk][c] = sum over the chunk's rows, then out[c] += the chunks' sums in order.
// With mean/rstd given, a second sum of n·dout (n = (inp - mean)·rstd, LayerNorm's normalized
// input) goes to partials + chunks·C: LayerNorm's weight gradient beside its bias gradient.

#include "compute/cuda/cuda_check.hpp"
#include "compute/cuda/launch_config.hpp"

namespace troupe::compute::cuda {
namespace {  // each including .cu file compiles its own copy

// grid (column_blocks(C), chunks), block (kWarp, kColumnRowThreads).
__global__ void column_partials_kernel(float* partials, const float* dout, const float* inp, const float* mean,
                                       const float* rstd, std::int64_t N, int C) {
  __shared__ float sums[2][kColumnRowThreads][kWarp];
  const int c = blockIdx.x * kWarp + threadIdx.x;
  const std::int64_t chunks = gridDim.y, chunk_rows = (N + chunks - 1) / chunks;
  const std::int64_t row_begin = blockIdx.y * chunk_rows, row_end = min(N, row_begin + chunk_rows);
  float sum = 0, dot = 0;
  if (c < C) {
    for (std::int64_t i = row_begin + threadIdx.y; i < row_end; i += kColumnRowThreads) {
      const float d = dout[i * C + c];
      sum += d;
      if (inp != nullptr) dot += (inp[i * C + c] - mean[i]) * rstd[i] * d;
    }
  }
  sums[0][threadIdx.y][threadIdx.x] = sum;
  sums[1][threadIdx.y][threadIdx.x] = dot;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int r = 1; r < kColumnRowThreads; ++r) {
      sum += sums[0][r][threadIdx.x];
      dot += sums[1][r][threadIdx.x];
    }
    partials[blockIdx.y * std::int64_t{C} + c] = sum;
    if (inp != nullptr) partials[(chunks + blockIdx.y) * std::int64_t{C} + c] = dot;
  }
}

__global__ void column_finalize_kernel(float* out, const float* partials, std::int64_t chunks, int C) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  if (c >= C) return;
  float sum = 0;
  for (std::int64_t k = 0; k < chunks; ++k) sum += partials[k * C + c];
  out[c] += sum;
}

// out_sum[c] += Σ dout[i][c]; with inp (LayerNorm), out_dot[c] += Σ n[i][c]·dout[i][c].
inline void column_sums(float* out_sum, float* out_dot, const float* dout, const float* inp, const float* mean,
                        const float* rstd, std::int64_t N, int C, float* scratch, cudaStream_t stream) {
  if (N == 0 || C == 0) return;
  const std::int64_t chunks = column_chunks(N);
  const dim3 grid(static_cast<unsigned>(column_blocks(C)), static_cast<unsigned>(chunks));
  column_partials_kernel<<<grid, dim3(kWarp, kColumnRowThreads), 0, stream>>>(scratch, dout, inp, mean, rstd, N, C);
  TROUPE_CUDA_LAUNCHED();
  const unsigned finalize_blocks = static_cast<unsigned>((C + kElementwiseThreads - 1) / kElementwiseThreads);
  column_finalize_kernel<<<finalize_blocks, kElementwiseThreads, 0, stream>>>(out_sum, scratch, chunks, C);
  TROUPE_CUDA_LAUNCHED();
  if (inp != nullptr) {
    column_finalize_kernel<<<finalize_blocks, kElementwiseThreads, 0, stream>>>(out_dot, scratch + chunks * C, chunks,
                                                                               C);
    TROUPE_CUDA_LAUNCHED();
  }
}

}  // namespace
}  // namespace troupe::compute::cuda
