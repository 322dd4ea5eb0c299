#pragma once
// What a CPU measurement times: the wall clock, or the CPU time of the calling thread or of the
// whole process (all its threads), which leaves out the time spent waiting for a core. On a
// machine that other work keeps busy, the thread's CPU time of a compute-bound op is what it
// takes on an idle one (so `troupe bench sim-check` measures this machine's figures for the sim
// backend, docs/scale.md).

namespace troupe::compute::cpu {

enum class CpuClock { wall, thread_cpu, process_cpu };

// Seconds on `clock` from an arbitrary origin.
double clock_seconds(CpuClock clock);

}  // namespace troupe::compute::cpu
