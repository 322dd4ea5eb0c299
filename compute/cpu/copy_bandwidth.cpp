#include "compute/cpu/copy_bandwidth.hpp"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

namespace troupe::compute::cpu {

double measure_copy_bandwidth(std::size_t bytes) {
  using Clock = std::chrono::steady_clock;
  std::vector<char> from(bytes, 1), to(bytes, 0);
  double best = 0;
  for (int rep = 0; rep < 5; ++rep) {
    from[static_cast<std::size_t>(rep)] = static_cast<char>(rep);  // each copy has something new to move
    const auto start = Clock::now();
    std::memcpy(to.data(), from.data(), bytes);
    const double secs = std::chrono::duration<double>(Clock::now() - start).count();
    if (rep > 0) best = std::max(best, 2.0 * static_cast<double>(bytes) / secs);
  }
  return best;
}

}  // namespace troupe::compute::cpu
