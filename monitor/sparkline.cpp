#include "monitor/sparkline.hpp"

#include <algorithm>

namespace troupe::monitor {

std::string sparkline(const std::vector<double>& values, std::size_t width) {
  static const char* const blocks[] = {"▁", "▂", "▃", "▄", "▅", "▆", "▇", "█"};
  if (values.empty() || width == 0) return {};
  const std::size_t columns = std::min(width, values.size());
  std::vector<double> means;
  for (std::size_t c = 0; c < columns; ++c) {
    const std::size_t begin = c * values.size() / columns, end = (c + 1) * values.size() / columns;
    double sum = 0;
    for (std::size_t i = begin; i < end; ++i) sum += values[i];
    means.push_back(sum / static_cast<double>(end - begin));
  }
  const auto [low, high] = std::minmax_element(means.begin(), means.end());
  std::string line;
  for (double m : means) {
    const int level = *high > *low ? static_cast<int>((m - *low) / (*high - *low) * 7.0 + 0.5) : 3;
    line += blocks[level];
  }
  return line;
}

}  // namespace troupe::monitor
