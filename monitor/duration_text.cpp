#include "monitor/duration_text.hpp"

#include <algorithm>
#include <cmath>

#include <spdlog/fmt/fmt.h>

namespace troupe::monitor {

std::string duration_text(double seconds) {
  const long s = std::lround(std::max(0.0, seconds));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, s / 60 % 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

}  // namespace troupe::monitor
