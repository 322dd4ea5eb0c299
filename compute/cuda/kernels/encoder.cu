// Token + position embedding. Forward is one pass over (B, T, C). Backward adds dout into the
// rows of dwte its tokens name and into dwpe by a sum over the batch per (t, c). A token repeated
// in the batch adds into one row from several positions: the positions are sorted by token (a
// stable radix sort, so each token's positions stay in order) and one block adds all of a token's
// positions, in order. Atomic adds would take them in any order, and the last bits of the sum
// would differ from run to run; in order, they equal the CPU backend's sum bit for bit.

#include <cub/device/device_radix_sort.cuh>

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

// The sort's input: each position's token, or V for a token outside the vocabulary (no row takes
// it), and the position itself.
__global__ void token_keys_kernel(std::uint32_t* keys, std::int32_t* positions, const std::int32_t* tokens, int V,
                                  std::int64_t n) {
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    const std::int32_t token = tokens[i];
    keys[i] = token >= 0 && token < V ? static_cast<std::uint32_t>(token) : static_cast<std::uint32_t>(V);
    positions[i] = static_cast<std::int32_t>(i);
  }
}

// Block i adds the run of equal tokens that starts at sorted index i (other blocks return): each
// thread a set of channels, the run's positions in order.
__global__ void encoder_backward_wte_kernel(float* dwte, const float* dout, const std::uint32_t* keys,
                                            const std::int32_t* positions, int C, int V, std::int64_t n) {
  for (std::int64_t i = blockIdx.x; i < n; i += gridDim.x) {
    const std::uint32_t token = keys[i];
    if (token == static_cast<std::uint32_t>(V) || (i > 0 && keys[i - 1] == token)) continue;
    float* row = dwte + std::int64_t{token} * C;
    for (int c = threadIdx.x; c < C; c += blockDim.x) {
      float sum = row[c];
      for (std::int64_t j = i; j < n && keys[j] == token; ++j) sum += dout[std::int64_t{positions[j]} * C + c];
      row[c] = sum;
    }
  }
}

// The sort's buffers, each aligned as cudaMalloc's, in the caller's scratch: keys and positions in
// and out, then the sort's own temporary storage.
constexpr std::size_t kAlign = 256;
std::size_t aligned(std::size_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

std::size_t sort_temp_bytes(std::int64_t n) {
  std::size_t bytes = 0;
  TROUPE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(
      nullptr, bytes, static_cast<const std::uint32_t*>(nullptr), static_cast<std::uint32_t*>(nullptr),
      static_cast<const std::int32_t*>(nullptr), static_cast<std::int32_t*>(nullptr), n));
  return bytes;
}

__global__ void encoder_backward_wpe_kernel(float* dwpe, const float* dout, int B, int T, int C) {
  const std::int64_t n = std::int64_t{T} * C;
  for (std::int64_t i = blockIdx.x * std::int64_t{blockDim.x} + threadIdx.x; i < n;
       i += std::int64_t{gridDim.x} * blockDim.x) {
    float sum = dwpe[i];
    for (int b = 0; b < B; ++b) sum += dout[b * n + i];
    dwpe[i] = sum;
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

std::size_t encoder_backward_scratch_bytes(std::int64_t positions) {
  return 2 * aligned(positions * sizeof(std::uint32_t)) + 2 * aligned(positions * sizeof(std::int32_t)) +
         sort_temp_bytes(positions);
}

void encoder_backward(float* dwte, float* dwpe, const float* dout, const std::int32_t* tokens, int B, int T, int C,
                      int V, void* scratch, cudaStream_t stream) {
  const std::int64_t n = std::int64_t{B} * T;
  if (n == 0 || C == 0) return;
  auto* bytes = static_cast<char*>(scratch);
  auto* keys_in = reinterpret_cast<std::uint32_t*>(bytes);
  auto* keys_out = reinterpret_cast<std::uint32_t*>(bytes + aligned(n * sizeof(std::uint32_t)));
  auto* positions_in = reinterpret_cast<std::int32_t*>(bytes + 2 * aligned(n * sizeof(std::uint32_t)));
  auto* positions_out = positions_in + aligned(n * sizeof(std::int32_t)) / sizeof(std::int32_t);
  void* sort_temp = bytes + 2 * aligned(n * sizeof(std::uint32_t)) + 2 * aligned(n * sizeof(std::int32_t));
  std::size_t temp_bytes = sort_temp_bytes(n);
  token_keys_kernel<<<elementwise_blocks(n), kElementwiseThreads, 0, stream>>>(keys_in, positions_in, tokens, V, n);
  TROUPE_CUDA_LAUNCHED();
  // Keys reach V at most: only their low bits need sorting.
  int key_bits = 1;
  while (key_bits < 32 && (std::uint32_t{1} << key_bits) <= static_cast<std::uint32_t>(V)) ++key_bits;
  TROUPE_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(sort_temp, temp_bytes, keys_in, keys_out, positions_in,
                                                    positions_out, n, 0, key_bits, stream));
  const int blocks = static_cast<int>(std::min(n, kMaxElementwiseBlocks));
  encoder_backward_wte_kernel<<<blocks, kElementwiseThreads, 0, stream>>>(dwte, dout, keys_out, positions_out, C, V, n);
  TROUPE_CUDA_LAUNCHED();
  encoder_backward_wpe_kernel<<<elementwise_blocks(std::int64_t{T} * C), kElementwiseThreads, 0, stream>>>(dwpe, dout,
                                                                                                        B, T, C);
  TROUPE_CUDA_LAUNCHED();
}

}  // namespace troupe::compute::cuda
