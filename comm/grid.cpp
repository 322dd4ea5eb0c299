#include "comm/grid.hpp"

#include <algorithm>

#include "comm/tag.hpp"

namespace troupe::comm {
namespace {

void check_rank(const Grid& grid, int rank) { TROUPE_CHECK(rank >= 0 && rank < grid.world(), "rank outside the grid"); }

}  // namespace

std::string Grid::describe() const {
  return "dp " + std::to_string(dp) + " × pp " + std::to_string(pp) + " × tp " + std::to_string(tp);
}

Status grid_check(const Grid& grid) {
  if (grid.dp < 1 || grid.pp < 1 || grid.tp < 1) {
    return Error{"comm: grid " + grid.describe() + ": every axis must be at least 1"};
  }
  if (static_cast<long long>(grid.dp) * grid.pp * grid.tp > max_rank + 1) {
    return Error{"comm: grid " + grid.describe() + " has more than " + std::to_string(max_rank + 1) + " ranks"};
  }
  return {};
}

GridCoord grid_coord(const Grid& grid, int rank) {
  check_rank(grid, rank);
  return GridCoord{(rank / grid.tp) % grid.dp, rank / (grid.tp * grid.dp), rank % grid.tp};
}

int grid_rank(const Grid& grid, const GridCoord& coord) {
  TROUPE_CHECK(
      coord.dp >= 0 && coord.dp < grid.dp && coord.pp >= 0 && coord.pp < grid.pp && coord.tp >= 0 && coord.tp < grid.tp,
      "coordinate outside the grid");
  return coord.tp + grid.tp * (coord.dp + grid.dp * coord.pp);
}

Group world_group(const Grid& grid) {
  Group group{world_group_id, {}};
  for (int r = 0; r < grid.world(); ++r) group.ranks.push_back(r);
  return group;
}

namespace {

// The ranks that share every coordinate with `rank` except `axis`, in order along it.
Group axis_group(const Grid& grid, int rank, std::uint16_t id, int GridCoord::*axis, int Grid::*extent) {
  GridCoord c = grid_coord(grid, rank);
  Group group{id, {}};
  for (c.*axis = 0; c.*axis < grid.*extent; ++(c.*axis)) group.ranks.push_back(grid_rank(grid, c));
  return group;
}

}  // namespace

Group dp_group(const Grid& grid, int rank) { return axis_group(grid, rank, dp_group_id, &GridCoord::dp, &Grid::dp); }
Group pp_group(const Grid& grid, int rank) { return axis_group(grid, rank, pp_group_id, &GridCoord::pp, &Grid::pp); }
Group tp_group(const Grid& grid, int rank) { return axis_group(grid, rank, tp_group_id, &GridCoord::tp, &Grid::tp); }

Group context_group(const Grid& grid, int rank, int shards) {
  TROUPE_CHECK(shards >= 1 && grid.dp % shards == 0, "context shards that do not divide the dp axis");
  GridCoord c = grid_coord(grid, rank);
  Group group{context_group_id, {}};
  const int first = c.dp / shards * shards;
  for (c.dp = first; c.dp < first + shards; ++c.dp) group.ranks.push_back(grid_rank(grid, c));
  return group;
}

int island_of(const Grid& grid, int rank, int islands) {
  TROUPE_CHECK(islands >= 1 && grid.dp % islands == 0, "islands that do not divide the dp axis");
  return grid_coord(grid, rank).dp / (grid.dp / islands);
}

Group island_group(const Grid& grid, int rank, int islands) {
  const int size = grid.dp / islands, first = island_of(grid, rank, islands) * size;
  GridCoord c = grid_coord(grid, rank);
  Group group{dp_group_id, {}};
  for (c.dp = first; c.dp < first + size; ++c.dp) group.ranks.push_back(grid_rank(grid, c));
  return group;
}

Group outer_group(const Grid& grid, int rank, int islands) {
  const int size = grid.dp / islands;
  GridCoord c = grid_coord(grid, rank);
  const int place = c.dp - island_of(grid, rank, islands) * size;
  Group group{outer_group_id, {}};
  for (int island = 0; island < islands; ++island) {
    c.dp = island * size + place;
    group.ranks.push_back(grid_rank(grid, c));
  }
  return group;
}

Group embedding_group(const Grid& grid, int rank) {
  GridCoord c = grid_coord(grid, rank);
  TROUPE_CHECK(grid.pp >= 2 && (c.pp == 0 || c.pp == grid.pp - 1), "embedding group of a middle stage");
  Group group{embedding_group_id, {}};
  for (int stage : {0, grid.pp - 1}) {
    c.pp = stage;
    group.ranks.push_back(grid_rank(grid, c));
  }
  return group;
}

std::vector<int> grid_partners(const Grid& grid, int rank) {
  std::vector<int> found;
  for (const Group& group : {dp_group(grid, rank), pp_group(grid, rank), tp_group(grid, rank)}) {
    const std::vector<int> some = partners(group, rank);
    found.insert(found.end(), some.begin(), some.end());
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  return found;
}

std::uint16_t epoch_group_id(std::uint16_t axis_id, int epoch) {
  TROUPE_CHECK(axis_id < 8 && epoch >= 0, "an epoch's group id needs an axis id below 8 and an epoch from 0");
  constexpr int cycle = (max_group_id + 1) / 8 - 1;  // epochs 1 … 511, then 1 again
  const int turn = epoch == 0 ? 0 : 1 + (epoch - 1) % cycle;
  return static_cast<std::uint16_t>(8 * turn + axis_id);
}

}  // namespace troupe::comm
