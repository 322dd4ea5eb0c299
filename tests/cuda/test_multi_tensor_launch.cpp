// Multi-tensor launch plans (compute/cuda/multi_tensor_launch.hpp), checked on the host: every
// chunk of every segment is covered exactly once, in list order, within each launch's limits,
// and gpt2's AdamW step takes a handful of launches instead of one per parameter tensor.

#include <catch2/catch.hpp>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "compute/cuda/multi_tensor_launch.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::compute::cuda {
namespace {

// Checks every launch against `limits` and returns how many blocks took each chunk of each
// segment (a block covers elements [chunk · limits.chunk, + limits.chunk) of its segment, clipped
// to its end); also requires (segment, chunk) to increase from block to block over the plan.
std::vector<std::vector<int>> coverage(const std::vector<MultiTensorLaunch>& plan,
                                       const std::vector<std::int64_t>& counts, MultiTensorLimits limits) {
  std::vector<std::vector<int>> covered;
  for (std::int64_t count : counts) covered.emplace_back((count + limits.chunk - 1) / limits.chunk, 0);
  std::pair<std::size_t, std::int64_t> previous{0, -1};
  for (std::size_t l = 0; l < plan.size(); ++l) {
    const MultiTensorLaunch& launch = plan[l];
    INFO("launch " << l);
    REQUIRE(!launch.segments.empty());
    REQUIRE(launch.segments.size() <= static_cast<std::size_t>(limits.segments_per_launch));
    REQUIRE(!launch.block_chunk.empty());
    REQUIRE(launch.block_chunk.size() <= static_cast<std::size_t>(limits.blocks_per_launch));
    REQUIRE(launch.block_segment.size() == launch.block_chunk.size());
    REQUIRE(std::is_sorted(launch.segments.begin(), launch.segments.end()));
    std::vector<bool> used(launch.segments.size(), false);
    for (std::size_t b = 0; b < launch.block_chunk.size(); ++b) {
      REQUIRE(launch.block_segment[b] < launch.segments.size());
      used[launch.block_segment[b]] = true;
      const std::size_t segment = launch.segments[launch.block_segment[b]];
      const std::int64_t chunk = launch.block_chunk[b];
      REQUIRE(std::make_pair(segment, chunk) > previous);
      previous = {segment, chunk};
      REQUIRE(chunk * limits.chunk < counts[segment]);
      ++covered[segment][chunk];
    }
    REQUIRE(std::count(used.begin(), used.end(), false) == 0);  // no segment listed without a block
  }
  return covered;
}

}  // namespace

TEST_CASE("a multi-tensor plan covers every element once, within its limits", "[cuda]") {
  const MultiTensorLimits limits{4, 3, 5};  // small, so launches close for both reasons
  const std::vector<std::int64_t> counts = {1, 9, 4, 13, 2, 3, 5, 4, 1, 30};
  const auto plan = plan_multi_tensor_launches(counts, limits);
  for (const auto& segment : coverage(plan, counts, limits))
    REQUIRE(std::count(segment.begin(), segment.end(), 1) == static_cast<std::ptrdiff_t>(segment.size()));
  // 23 chunks: full of blocks (1 + 3 + 1, 4 + 1), out of segments (1 + 2 + 1), full again (1 + 4),
  // and the rest of the last segment, which went on from one launch into the next.
  REQUIRE(plan.size() == 5);
  CHECK(plan[0].segments == std::vector<std::size_t>{0, 1, 2});
  CHECK(plan[2].segments == std::vector<std::size_t>{5, 6, 7});
  CHECK(plan[2].block_chunk.size() == 4);
  CHECK(plan[3].segments == std::vector<std::size_t>{8, 9});
  CHECK(plan[4].segments == std::vector<std::size_t>{9});
  CHECK(plan[4].block_chunk == std::vector<std::int32_t>{4, 5, 6, 7});
}

TEST_CASE("a multi-tensor plan of nothing is empty, and empty segments and bad limits are refused", "[cuda]") {
  CHECK(plan_multi_tensor_launches({}, kAdamWLimits).empty());
  CHECK_THROWS_AS(plan_multi_tensor_launches({5, 0, 3}, kAdamWLimits), std::logic_error);
  CHECK_THROWS_AS(plan_multi_tensor_launches({5}, MultiTensorLimits{4, 257, 5}), std::logic_error);
  CHECK_THROWS_AS(plan_multi_tensor_launches({5}, MultiTensorLimits{0, 3, 5}), std::logic_error);
}

TEST_CASE("gpt2's AdamW step takes 7 launches, not one per parameter tensor", "[cuda]") {
  const auto config = gpt_preset("gpt2");
  REQUIRE(config.has_value());
  const ParameterLayout layout(*config);
  std::vector<std::int64_t> counts;
  for (const ParameterView& view : layout.views()) counts.push_back(view.numel());
  REQUIRE(counts.size() == 148);  // what AdamW used to launch one kernel for, each step
  const auto plan = plan_multi_tensor_launches(counts, kAdamWLimits);
  for (const auto& segment : coverage(plan, counts, kAdamWLimits))
    REQUIRE(std::count(segment.begin(), segment.end(), 1) == static_cast<std::ptrdiff_t>(segment.size()));
  CHECK(plan.size() == 7);
}

}  // namespace troupe::compute::cuda
