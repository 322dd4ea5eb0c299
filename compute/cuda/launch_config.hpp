#pragma once
// Launch geometry of the CUDA kernels as plain host functions: it decides how work is cut into
// blocks, so it is unit-tested on machines without a GPU (tests/cuda). The kernels in kernels/
// assume exactly these numbers.

#include <algorithm>
#include <cstdint>

namespace troupe::compute::cuda {

// Elementwise kernels run grid-stride loops: enough blocks to fill any current GPU, never more
// than the work needs.
constexpr int kElementwiseThreads = 256;
constexpr std::int64_t kMaxElementwiseBlocks = 8192;
constexpr std::int64_t elementwise_blocks(std::int64_t n) {
  return std::clamp<std::int64_t>((n + kElementwiseThreads - 1) / kElementwiseThreads, 1, kMaxElementwiseBlocks);
}

// Multi-tensor kernels (apex's multi_tensor_apply; multi_tensor_launch.hpp plans them): one
// launch sweeps many segments of flat buffers, each block one `chunk` of one segment. Which
// segment and chunk travels in the kernel's parameters (4 KiB at most), so a launch takes at most
// `segments_per_launch` segments and `blocks_per_launch` blocks, and a long list several launches.
struct MultiTensorLimits {
  std::int64_t chunk;
  int segments_per_launch;  // at most 256: a block names its segment in one byte
  int blocks_per_launch;
};

// AdamW (kernels/adamw.cu): its parameters take 56 bytes plus 32 per segment and 5 per block, so
// these limits fill about 2.7 KiB of the 4 KiB. 65536 elements per block of 256 threads keep each
// thread streaming 256 elements, as the elementwise kernels' grid-stride loops do.
constexpr int kAdamWThreads = 256;
constexpr MultiTensorLimits kAdamWLimits{65536, 32, 320};

// Row kernels (LayerNorm): one warp per row, kRowsPerBlock rows per block.
constexpr int kWarp = 32;
constexpr int kRowsPerBlock = 8;
constexpr std::int64_t row_blocks(std::int64_t rows) { return std::max<std::int64_t>((rows + kRowsPerBlock - 1) / kRowsPerBlock, 1); }

// Column sums over N rows of a (N, C) matrix (bias and LayerNorm parameter gradients), in two
// deterministic passes: blocks of kWarp columns × kColumnRowThreads row-threads write one partial
// sum per (row chunk, column), then one thread per column adds the chunks in order. The chunk
// count grows with N up to kMaxColumnChunks so long inputs still fill the GPU.
constexpr int kColumnRowThreads = 8;
constexpr std::int64_t kRowsPerColumnChunk = 256;
constexpr std::int64_t kMaxColumnChunks = 128;
constexpr std::int64_t column_chunks(std::int64_t rows) {
  return std::clamp<std::int64_t>((rows + kRowsPerColumnChunk - 1) / kRowsPerColumnChunk, 1, kMaxColumnChunks);
}
constexpr std::int64_t column_blocks(std::int64_t columns) { return (columns + kWarp - 1) / kWarp; }

// Cross-entropy: one block per row (the vocabulary is long).
constexpr int kCrossEntropyThreads = 512;

// sum_of_squares: partial sums in double from at most kMaxReduceBlocks blocks, then one block.
constexpr int kReduceThreads = 256;
constexpr std::int64_t kMaxReduceBlocks = 1024;
constexpr std::int64_t reduce_blocks(std::int64_t n) {
  return std::clamp<std::int64_t>((n + kReduceThreads - 1) / kReduceThreads, 1, kMaxReduceBlocks);
}

// Flash attention. A kernel is compiled for a head-size bound (64 or 128) and runs any head size
// up to it; 0 means the head size is unsupported.
constexpr int attention_head_bound(int head_size) {
  if (head_size <= 0) return 0;
  if (head_size <= 64) return 64;
  if (head_size <= 128) return 128;
  return 0;
}

// Query-row kernels (forward, dq): one thread per query row, kAttentionRows rows per block; the
// block streams the keys it needs, key_tile(bound) at a time, through shared memory.
constexpr int kAttentionRows = 64;
constexpr int attention_key_tile(int bound) { return 4096 / bound; }  // two tiles (k and v) = 32 KiB
// Key-row kernel (dk, dv): one thread per key row; queries stream through shared memory
// attention_query_tile(bound) at a time while dk and dv accumulate in padded shared rows.
constexpr int attention_key_rows(int bound) { return bound <= 64 ? 64 : 32; }
constexpr int attention_query_tile(int bound) { return bound <= 64 ? 16 : 8; }
constexpr std::int64_t attention_dkdv_shared_bytes(int bound) {
  const std::int64_t accumulators = 2LL * attention_key_rows(bound) * (bound + 1);
  const std::int64_t query_tiles = 2LL * attention_query_tile(bound) * bound + 2LL * attention_query_tile(bound);
  return (accumulators + query_tiles) * 4;
}
// Blocks along the sequence for T rows (x) and one per (sequence, head) pair (y).
constexpr std::int64_t attention_row_blocks(std::int64_t T, int rows_per_block) {
  return (T + rows_per_block - 1) / rows_per_block;
}
// Query-row blocks are issued from the last (the most keys to read) to the first, so the long
// causal tiles start early and the short ones fill the tail.
constexpr std::int64_t attention_tile_of_block(std::int64_t block, std::int64_t blocks) { return blocks - 1 - block; }

}  // namespace troupe::compute::cuda
