#include "comm/group.hpp"

#include <algorithm>

#include "compute/check.hpp"

namespace troupe::comm {

int Group::position_of(int rank) const {
  for (int i = 0; i < size(); ++i) {
    if (ranks[i] == rank) return i;
  }
  return -1;
}

std::vector<int> partners(const Group& group, int rank) {
  const int n = group.size(), p = group.position_of(rank);
  std::vector<int> found;
  if (p < 0) return found;
  for (int distance = 1; distance < n; distance *= 2) {
    found.push_back(group.ranks[(p + distance) % n]);
    found.push_back(group.ranks[((p - distance) % n + n) % n]);
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  std::erase(found, rank);
  return found;
}

std::string Group::describe() const {
  std::string text = "group " + std::to_string(id) + " [";
  for (int i = 0; i < size(); ++i) {
    if (i > 0) text += ' ';
    text += std::to_string(ranks[i]);
  }
  text += ']';
  return text;
}

Slice segment_of(std::int64_t count, int parts, int index) {
  TROUPE_CHECK(parts > 0 && index >= 0 && index < parts && count >= 0, "bad segment request");
  const std::int64_t base = count / parts;
  const std::int64_t extra = count % parts;
  return Slice{index * base + std::min<std::int64_t>(index, extra), base + (index < extra ? 1 : 0)};
}

}  // namespace troupe::comm
