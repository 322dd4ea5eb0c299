#include "apps/config/byte_size.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <iterator>
#include <system_error>

namespace troupe::apps {

std::optional<double> parse_byte_size(const std::string& text) {
  // Decimal only: from_chars reads no hex ("0x10"), no leading space or sign; inf and nan are
  // refused below as not finite.
  double value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc()) return std::nullopt;
  std::string unit(end, text.data() + text.size());
  if (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  const struct {
    const char* name;
    double scale;
  } units[] = {{"", 1},         {"B", 1},        {"kB", 1e3},    {"KB", 1e3},     {"MB", 1e6},     {"GB", 1e9},
               {"TB", 1e12},    {"PB", 1e15},    {"EB", 1e18},   {"K", 1e3},      {"M", 1e6},      {"G", 1e9},
               {"T", 1e12},     {"P", 1e15},     {"E", 1e18},    {"KiB", 0x1p10}, {"MiB", 0x1p20}, {"GiB", 0x1p30},
               {"TiB", 0x1p40}, {"PiB", 0x1p50}, {"EiB", 0x1p60}};
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
