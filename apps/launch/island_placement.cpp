// Host-file lines ordered by the island they name; see island_placement.hpp.

#include "apps/launch/island_placement.hpp"

#include <algorithm>
#include <deque>

namespace troupe::launch {
namespace {

std::string at_line(std::string_view origin, const HostEntry& node) {
  return std::string(origin) + ":" + std::to_string(node.line) + ": ";
}

}  // namespace

Expected<std::vector<HostEntry>> place_islands(const std::vector<HostEntry>& nodes,
                                               const std::vector<int>& island_of_rank, int islands,
                                               std::string_view origin) {
  const std::string train_islands = "train.islands " + std::to_string(islands);
  std::vector<std::deque<const HostEntry*>> lines_of(static_cast<std::size_t>(islands));
  std::vector<long long> slots_of(static_cast<std::size_t>(islands), 0);
  for (const HostEntry& node : nodes) {
    if (node.island < 0 || node.island >= islands)
      return Error{at_line(origin, node) + "island=" + std::to_string(node.island) + " is not an island of the job (" +
                   train_islands + ": islands 0 to " + std::to_string(islands - 1) + ")"};
    lines_of[node.island].push_back(&node);
    slots_of[node.island] += node.slots;
  }
  std::vector<long long> ranks_of(static_cast<std::size_t>(islands), 0);
  for (int island : island_of_rank) ++ranks_of[island];
  for (int island = 0; island < islands; ++island)
    if (lines_of[island].empty())
      return Error{std::string(origin) + ": island " + std::to_string(island) + " has no line (" + train_islands +
                   ": every island from 0 to " + std::to_string(islands - 1) + " needs its lines)"};
  for (int island = 0; island < islands; ++island) {
    if (slots_of[island] != ranks_of[island])
      return Error{std::string(origin) + ": the lines of island " + std::to_string(island) + " hold " +
                   std::to_string(slots_of[island]) + " slot(s), and each island of the job holds " +
                   std::to_string(ranks_of[island]) + " rank(s) (" + train_islands + " of " +
                   std::to_string(island_of_rank.size()) + ")"};
  }
  std::vector<HostEntry> placed;
  std::size_t rank = 0;
  while (rank < island_of_rank.size()) {
    const int island = island_of_rank[rank];
    const HostEntry& node = *lines_of[island].front();
    lines_of[island].pop_front();
    for (std::size_t r = rank; r < rank + static_cast<std::size_t>(node.slots); ++r)
      if (island_of_rank[r] != island)
        return Error{at_line(origin, node) + "its " + std::to_string(node.slots) + " slots would hold ranks " +
                     std::to_string(rank) + " to " + std::to_string(rank + node.slots - 1) + ", and rank " +
                     std::to_string(r) + " is in island " + std::to_string(island_of_rank[r]) + ", not " +
                     std::to_string(island) +
                     " (with pipeline stages an island's ranks are not consecutive: give its lines fewer slots)"};
    placed.push_back(node);
    rank += static_cast<std::size_t>(node.slots);
  }
  return placed;
}

std::string describe_island_placement(const std::vector<HostEntry>& placed, int islands) {
  std::string text;
  for (int island = 0; island < islands; ++island) {
    std::string lines;
    for (const HostEntry& node : placed)
      if (node.island == island)
        lines += (lines.empty() ? "" : ", ") + node.host + " (line " + std::to_string(node.line) + ")";
    text += (text.empty() ? "" : "; ") + ("island " + std::to_string(island) + ": " + lines);
  }
  return text;
}

}  // namespace troupe::launch
