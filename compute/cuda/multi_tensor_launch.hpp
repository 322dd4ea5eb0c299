#pragma once
// The host side of a multi-tensor kernel (launch_config.hpp's MultiTensorLimits): which launches
// a list of segments takes, and which chunk of which segment each block of a launch handles.
// Plain C++17 without CUDA, so the plan is unit-tested on machines without a GPU (tests/cuda) and
// the kernels' launchers (compiled by nvcc) use the same code.

#include <cstddef>
#include <cstdint>
#include <vector>

#include "compute/cuda/launch_config.hpp"

namespace troupe::compute::cuda {

struct MultiTensorLaunch {
  std::vector<std::size_t> segments;        // indices into the planned list, ascending
  std::vector<std::uint8_t> block_segment;  // per block: a position in `segments`
  std::vector<std::int32_t> block_chunk;    // per block: which chunk of that segment
};

// Launches covering every element of segments of `counts` elements (each > 0) exactly once, in
// list order: blocks take consecutive chunks, a launch is closed when it is full of blocks or
// would need one segment too many, and a segment cut there goes on in the next launch.
std::vector<MultiTensorLaunch> plan_multi_tensor_launches(const std::vector<std::int64_t>& counts,
                                                          MultiTensorLimits limits);

}  // namespace troupe::compute::cuda
