// LayerNorm over rows of C, eps 1e-5, biased variance taken around the mean in a second pass (as
// layernorm.cpp). One warp per row; the row's statistics come from warp shuffles. The parameter
// gradients are column sums over rows (column_sums.cuh), deterministic.
//   dinp += rstd · (g - mean(g) - n · mean(g · n)),  g = weight · dout,  n = (x - mean) · rstd

#include "compute/cuda/cuda_check.hpp"
#include "compute/cuda/kernels/column_sums.cuh"
#include "compute/cuda/kernels/kernels.hpp"
#include "compute/cuda/kernels/reduce.cuh"
#include "compute/cuda/launch_config.hpp"

namespace troupe::compute::cuda {
namespace {

__global__ void layernorm_forward_kernel(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                                         const float* bias, std::int64_t N, int C) {
  const std::int64_t row = blockIdx.x * std::int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* x = inp + row * C;
  float sum = 0;
  for (int c = lane; c < C; c += kWarp) sum += x[c];
  const float m = warp_sum(sum) / C;
  float sq = 0;
  for (int c = lane; c < C; c += kWarp) sq += (x[c] - m) * (x[c] - m);
  const float s = 1.0f / sqrtf(warp_sum(sq) / C + 1e-5f);
  float* o = out + row * C;
  for (int c = lane; c < C; c += kWarp) o[c] = (x[c] - m) * s * weight[c] + bias[c];
  if (lane == 0) {
    mean[row] = m;
    rstd[row] = s;
  }
}

__global__ void layernorm_backward_input_kernel(float* dinp, const float* dout, const float* inp, const float* weight,
                                                const float* mean, const float* rstd, std::int64_t N, int C) {
  const std::int64_t row = blockIdx.x * std::int64_t{kRowsPerBlock} + threadIdx.x / kWarp;
  const int lane = threadIdx.x % kWarp;
  if (row >= N) return;
  const float* x = inp + row * C;
  const float* d = dout + row * C;
  const float m = mean[row], s = rstd[row];
  float g_sum = 0, gn_sum = 0;
  for (int c = lane; c < C; c += kWarp) {
    const float g = weight[c] * d[c];
    g_sum += g;
    gn_sum += g * (x[c] - m) * s;
  }
  const float g_mean = warp_sum(g_sum) / C, gn_mean = warp_sum(gn_sum) / C;
  float* dx = dinp + row * C;
  for (int c = lane; c < C; c += kWarp) dx[c] += s * (weight[c] * d[c] - g_mean - (x[c] - m) * s * gn_mean);
}

}  // namespace

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                       std::int64_t N, int C, cudaStream_t stream) {
  if (N == 0) return;
  layernorm_forward_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, stream>>>(out, mean, rstd, inp, weight, bias, N,
                                                                                 C);
  TROUPE_CUDA_LAUNCHED();
}

void layernorm_backward_input(float* dinp, const float* dout, const float* inp, const float* weight, const float* mean,
                              const float* rstd, std::int64_t N, int C, cudaStream_t stream) {
  if (N == 0) return;
  layernorm_backward_input_kernel<<<row_blocks(N), kRowsPerBlock * kWarp, 0, stream>>>(dinp, dout, inp, weight, mean,
                                                                                        rstd, N, C);
  TROUPE_CUDA_LAUNCHED();
}

void layernorm_backward_params(float* dweight, float* dbias, const float* dout, const float* inp, const float* mean,
                               const float* rstd, std::int64_t N, int C, float* column_scratch, cudaStream_t stream) {
  if (N == 0) return;
  column_sums(dbias, dweight, dout, inp, mean, rstd, N, C, column_scratch, stream);
}

}  // namespace troupe::compute::cuda
