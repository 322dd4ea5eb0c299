// The CUDA kernels' launch geometry (compute/cuda/launch_config.hpp), checked on the host: every
// element, row, column and query/key position is covered, within the hardware's limits.

#include <catch2/catch.hpp>

#include "compute/cuda/launch_config.hpp"

namespace troupe::compute::cuda {

TEST_CASE("elementwise grids cover any length with a bounded block count", "[cuda]") {
  REQUIRE(elementwise_blocks(0) == 1);
  REQUIRE(elementwise_blocks(1) == 1);
  REQUIRE(elementwise_blocks(kElementwiseThreads) == 1);
  REQUIRE(elementwise_blocks(kElementwiseThreads + 1) == 2);
  REQUIRE(elementwise_blocks(std::int64_t{1} << 40) == kMaxElementwiseBlocks);  // grid-stride covers the rest
}

TEST_CASE("row and column reductions cover every row and column", "[cuda]") {
  for (std::int64_t rows : {1, 7, 8, 9, 16384}) REQUIRE(row_blocks(rows) * kRowsPerBlock >= rows);
  REQUIRE(row_blocks(8) == 1);
  for (std::int64_t columns : {1, 31, 32, 33, 768, 50304}) {
    REQUIRE(column_blocks(columns) * kWarp >= columns);
    REQUIRE((column_blocks(columns) - 1) * kWarp < columns);
  }
  REQUIRE(column_chunks(1) == 1);
  REQUIRE(column_chunks(kRowsPerColumnChunk + 1) == 2);
  REQUIRE(column_chunks(16 * 1024) == 64);
  REQUIRE(column_chunks(std::int64_t{1} << 30) == kMaxColumnChunks);
  REQUIRE(reduce_blocks(1) == 1);
  REQUIRE(reduce_blocks(std::int64_t{124} << 20) == kMaxReduceBlocks);
}

TEST_CASE("attention tiles: head-size bounds, shared memory, causal tile order", "[cuda]") {
  REQUIRE(attention_head_bound(0) == 0);
  REQUIRE(attention_head_bound(32) == 64);
  REQUIRE(attention_head_bound(64) == 64);
  REQUIRE(attention_head_bound(65) == 128);
  REQUIRE(attention_head_bound(128) == 128);
  REQUIRE(attention_head_bound(129) == 0);
  for (int bound : {64, 128}) {
    INFO("bound " << bound);
    REQUIRE(2 * attention_key_tile(bound) * bound * 4 <= 48 * 1024);  // static shared memory limit
    REQUIRE(attention_dkdv_shared_bytes(bound) <= 48 * 1024);          // no opt-in attribute needed
    REQUIRE(attention_key_rows(bound) % kWarp == 0);
  }
  REQUIRE(attention_row_blocks(1024, kAttentionRows) == 16);
  REQUIRE(attention_row_blocks(1025, kAttentionRows) == 17);
  // Block 0 takes the last query tile (the most keys), and the mapping is a permutation.
  const std::int64_t blocks = attention_row_blocks(1000, kAttentionRows);
  REQUIRE(attention_tile_of_block(0, blocks) == blocks - 1);
  REQUIRE(attention_tile_of_block(blocks - 1, blocks) == 0);
}

}  // namespace troupe::compute::cuda
