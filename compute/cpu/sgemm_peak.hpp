#pragma once
// The CPU's attainable FLOP/s as OpenBLAS' sgemm reaches it with the threads it has now: the
// denominator of MFU on the CPU backend (`troupe bench compute`, troupe_mfu in docs/metrics.md).

#include <initializer_list>

#include "compute/cpu/cpu_clock.hpp"

namespace troupe::compute::cpu {

// Best rate of a few n×n×n sgemms for each size (the first run of each size warms up and does
// not count), timed on `clock` (the thread's CPU time only with one OpenBLAS thread). 1024 alone
// takes a fraction of a second on a few cores; 2048 reaches the steady state of wide machines.
double measure_sgemm_peak(std::initializer_list<int> sizes = {1024, 2048}, CpuClock clock = CpuClock::wall);

}  // namespace troupe::compute::cpu
