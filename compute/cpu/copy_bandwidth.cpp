#include "compute/cpu/copy_bandwidth.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

namespace troupe::compute::cpu {

double measure_copy_bandwidth(std::size_t bytes, CpuClock clock) {
  std::vector<char> from(bytes, 1), to(bytes, 0);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    from[static_cast<std::size_t>(rep)] = static_cast<char>(rep);  // each copy has something new to move
    const double start = clock_seconds(clock);
    std::memcpy(to.data(), from.data(), bytes);
    const double secs = clock_seconds(clock) - start;
    if (rep > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / secs);
  }
  return best;
}

}  // namespace troupe::compute::cpu
