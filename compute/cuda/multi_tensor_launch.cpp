#include "compute/cuda/multi_tensor_launch.hpp"

#include <limits>
#include <string>

#include "compute/check.hpp"

namespace troupe::compute::cuda {

std::vector<MultiTensorLaunch> plan_multi_tensor_launches(const std::vector<std::int64_t>& counts,
                                                          MultiTensorLimits limits) {
  TROUPE_CHECK(limits.chunk > 0 && limits.blocks_per_launch > 0 && limits.segments_per_launch > 0 &&
                   limits.segments_per_launch <= 256,
               "multi-tensor limits");
  std::vector<MultiTensorLaunch> launches;
  MultiTensorLaunch launch;
  auto close = [&] {
    launches.push_back(std::move(launch));
    launch = MultiTensorLaunch{};
  };
  for (std::size_t segment = 0; segment < counts.size(); ++segment) {
    TROUPE_CHECK(counts[segment] > 0, "multi-tensor segment " + std::to_string(segment) + " is empty");
    const std::int64_t chunks = (counts[segment] + limits.chunk - 1) / limits.chunk;
    TROUPE_CHECK(chunks <= std::numeric_limits<std::int32_t>::max(),
                 "multi-tensor segment " + std::to_string(segment) + " has too many chunks");
    for (std::int64_t chunk = 0; chunk < chunks; ++chunk) {
      if (launch.segments.empty() || launch.segments.back() != segment) {
        if (launch.segments.size() == static_cast<std::size_t>(limits.segments_per_launch)) close();
        launch.segments.push_back(segment);
      }
      launch.block_segment.push_back(static_cast<std::uint8_t>(launch.segments.size() - 1));
      launch.block_chunk.push_back(static_cast<std::int32_t>(chunk));
      if (launch.block_chunk.size() == static_cast<std::size_t>(limits.blocks_per_launch)) close();
    }
  }
  if (!launch.block_chunk.empty()) close();
  return launches;
}

}  // namespace troupe::compute::cuda
