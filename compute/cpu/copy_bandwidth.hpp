#pragma once
// The memory bandwidth one thread reaches copying a buffer far larger than the caches: what a
// memory-bound op of the CPU backend can move, and so the `sim.memory_bandwidth` that stands for
// this machine (`troupe bench sim-check`, docs/scale.md).

#include <cstddef>

#include "compute/cpu/cpu_clock.hpp"

namespace troupe::compute::cpu {

// Bytes read plus bytes written per second, the best of a few copies of `bytes` (the first
// warms up and does not count), timed on `clock`.
double measure_copy_bandwidth(std::size_t bytes = std::size_t{64} << 20, CpuClock clock = CpuClock::wall);

}  // namespace troupe::compute::cpu
