#include "apps/config/spelling.hpp"

#include <algorithm>
#include <numeric>

namespace troupe::apps {
namespace {

// Optimal-string-alignment distance: insertions, deletions, substitutions and adjacent swaps.
std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  std::iota(d[0].begin(), d[0].end(), std::size_t{0});
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.size()][b.size()];
}

std::string_view last_part(std::string_view name) {
  const auto dot = name.rfind('.');
  if (dot != std::string_view::npos) return name.substr(dot + 1);
  return name.substr(std::min(name.find_first_not_of('-'), name.size()));
}

}  // namespace

std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates) {
  const std::string_view word_part = last_part(word);
  for (const auto& candidate : candidates) {
    if (!word_part.empty() && last_part(candidate) == word_part) return candidate;
  }
  const std::size_t reach = word.size() <= 4 ? 1 : word.size() <= 12 ? 2 : 3;
  std::optional<std::string> best;
  std::size_t best_distance = reach + 1;
  for (const auto& candidate : candidates) {
    const std::size_t distance = edit_distance(word, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace troupe::apps
