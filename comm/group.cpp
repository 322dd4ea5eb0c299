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
