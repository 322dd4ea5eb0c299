#pragma once
// A group is the ranks that run collectives together, in ring order, with the id that keeps
// their messages apart from other groups' (the tag's group field, comm/tag.hpp). Two groups
// may share an id only if no two ranks belong to both: messages between a pair of ranks are
// told apart by group id and sequence alone. The grid's groups use ids 0 to 3 (grid.hpp);
// other groups take ids from first_free_group_id up.

#include <cstdint>
#include <string>
#include <vector>

namespace troupe::comm {

inline constexpr std::uint16_t first_free_group_id = 4;

struct Group {
  std::uint16_t id = 0;
  std::vector<int> ranks;  // global ranks; ranks[i] is at position i of the ring

  int size() const { return static_cast<int>(ranks.size()); }
  // The position of `rank` in the group, or -1 when it is not a member.
  int position_of(int rank) const;
  std::string describe() const;  // "group 1 [0 2 4]"
};

// Part `index` of `count` elements split over `parts` as evenly as it goes: the first
// count % parts parts hold one element more. Reduce-scatter leaves part p at position p.
struct Slice {
  std::int64_t offset = 0;
  std::int64_t count = 0;
};
Slice segment_of(std::int64_t count, int parts, int index);

}  // namespace troupe::comm
