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

// The ranks `rank` exchanges messages with in the group's collectives: its ring neighbours (rings,
// the chain broadcast, pipeline sends) and its dissemination barrier's partners, 2^k positions
// either way — 2 log2 n of n. Symmetric: b is among a's partners exactly when a is among b's.
// Sorted, without `rank`; empty when it is not a member.
std::vector<int> partners(const Group& group, int rank);

// Part `index` of `count` elements split over `parts` as evenly as it goes: the first
// count % parts parts hold one element more. Reduce-scatter leaves part p at position p.
struct Slice {
  std::int64_t offset = 0;
  std::int64_t count = 0;
};
Slice segment_of(std::int64_t count, int parts, int index);

}  // namespace troupe::comm
