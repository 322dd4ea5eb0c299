#include "apps/config/byte_size.hpp"

#include <cmath>
#include <cstdio>
#include <exception>
#include <iterator>

namespace troupe::apps {

std::optional<double> parse_byte_size(const std::string& text) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    return std::nullopt;
  }
  std::string unit = text.substr(used);
  if (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  const struct {
    const char* name;
    double scale;
  } units[] = {{"", 1},
               {"B", 1},
               {"kB", 1e3},
               {"KB", 1e3},
               {"MB", 1e6},
               {"GB", 1e9},
               {"TB", 1e12},
               {"K", 1e3},
               {"M", 1e6},
               {"G", 1e9},
               {"T", 1e12},
               {"KiB", 1024.0},
               {"MiB", 1048576.0},
               {"GiB", 1073741824.0},
               {"TiB", 1099511627776.0}};
  for (const auto& u : units)
    if (unit == u.name && std::isfinite(value * u.scale) && value > 0) return value * u.scale;
  return std::nullopt;
}

std::string format_binary_size(double bytes) {
  const char* units[] = {"MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = bytes / (1024.0 * 1024.0);
  std::size_t unit = 0;
  for (; value >= 1024 && unit + 1 < std::size(units); ++unit) value /= 1024;
  char text[48];
  std::snprintf(text, sizeof text, "%.1f %s", value, units[unit]);
  return text;
}

}  // namespace troupe::apps
