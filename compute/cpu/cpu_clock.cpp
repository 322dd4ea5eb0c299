#include "compute/cpu/cpu_clock.hpp"

#include <time.h>

namespace troupe::compute::cpu {

double clock_seconds(CpuClock clock) {
  timespec now{};
  clock_gettime(clock == CpuClock::wall         ? CLOCK_MONOTONIC
                : clock == CpuClock::thread_cpu ? CLOCK_THREAD_CPUTIME_ID
                                                : CLOCK_PROCESS_CPUTIME_ID,
                &now);
  return static_cast<double>(now.tv_sec) + 1e-9 * static_cast<double>(now.tv_nsec);
}

}  // namespace troupe::compute::cpu
