#pragma once
// The disk's sequential write speed, measured the way a checkpoint writes: big blocks, one
// fsync at the end. It is the reference for the bench's "checkpoint throughput within 0.7 of
// disk sequential write".

#include <cstdint>
#include <filesystem>

#include "compute/expected.hpp"

namespace troupe::checkpoint {

// Writes `bytes` into a temporary file in `dir`, syncs it, removes it; bytes per second,
// counting the sync. Use more bytes than the disk's write cache for a steady figure.
Expected<double> measure_sequential_write(const std::filesystem::path& dir, std::uint64_t bytes);

}  // namespace troupe::checkpoint
