// Reductions: the bias gradient's column sums (column_sums.cuh) and the sum of squares behind
// gradient clipping, accumulated in double: per-block partials, then one block adds them in
// order, so the result is the same on every run.

#include "compute/cuda/cuda_check.hpp"
#include "compute/cuda/kernels/column_sums.cuh"
#include "compute/cuda/kernels/kernels.hpp"
#include "compute/cuda/kernels/reduce.cuh"
#include "compute/cuda/launch_config.hpp"

namespace troupe::compute::cuda {
namespace {

struct Plus {
  __device__ double operator()(double a, double b) const { return a + b; }
};

__global__ void squares_partial_kernel(double* partials, const float* x, std::int64_t n) {
  __shared__ double shared[kReduceThreads / kWarp];
  double sum = 0;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x)
    sum += double{x[i]} * x[i];
  sum = block_reduce(sum, shared, Plus{});
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void sum_partials_kernel(double* result, const double* partials, std::int64_t count) {
  __shared__ double shared[kReduceThreads / kWarp];
  double sum = 0;
  for (std::int64_t i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_reduce(sum, shared, Plus{});
  if (threadIdx.x == 0) *result = sum;
}

}  // namespace

void add_column_sums(float* dbias, const float* dout, std::int64_t N, int OC, float* column_scratch,
                     cudaStream_t stream) {
  column_sums(dbias, nullptr, dout, nullptr, nullptr, nullptr, N, OC, column_scratch, stream);
}

void sum_of_squares(double* result, const float* x, std::int64_t n, double* partials, cudaStream_t stream) {
  const std::int64_t blocks = reduce_blocks(n);
  squares_partial_kernel<<<blocks, kReduceThreads, 0, stream>>>(partials, x, n);
  TROUPE_CUDA_LAUNCHED();
  sum_partials_kernel<<<1, kReduceThreads, 0, stream>>>(result, partials, blocks);
  TROUPE_CUDA_LAUNCHED();
}

}  // namespace troupe::compute::cuda
