#pragma once
// The process grid: world = dp × pp × tp. Ranks are laid out in Megatron's "tp-dp-pp" order:
// tp varies fastest, then dp, and pp slowest, so tensor-parallel peers (the chattiest) are
// neighbours and pipeline stages (the quietest) are furthest apart:
//
//     rank = tp + grid.tp * (dp + grid.dp * pp)
//
// A rank's dp group holds the ranks that differ from it only in dp (same stage, same shard),
// and so on. Groups along different axes never share two ranks, so each axis has one group
// id (world 0, dp 1, pp 2, tp 3; the embedding pairs 4) however many groups it has. Pure functions, no engine.

#include <string>
#include <vector>

#include "comm/group.hpp"
#include "compute/expected.hpp"

namespace troupe::comm {

inline constexpr std::uint16_t world_group_id = 0;
inline constexpr std::uint16_t dp_group_id = 1;
inline constexpr std::uint16_t pp_group_id = 2;
inline constexpr std::uint16_t tp_group_id = 3;
inline constexpr std::uint16_t embedding_group_id = 4;
// Not a group of the grid: the point-to-point messages of an in-place recovery's state transfer
// (a surviving replica's parameters and moments to a respawned rank) carry this id, per epoch.
inline constexpr std::uint16_t state_transfer_group_id = 5;
// Not a group of the grid either: the ring shifts and all-to-alls of a context group (context_group
// below, actors/worker/mailbox_context_exchange.hpp), or of an expert group (expert_group below;
// a job has one kind or the other, never both), carry this id.
inline constexpr std::uint16_t context_group_id = 6;
// DiLoCo's outer groups (outer_group below): the ranks at one place of every island; or the
// expert data-parallel groups of a job with expert shards (expert_data_group below).
inline constexpr std::uint16_t outer_group_id = 7;

struct Grid {
  int dp = 1;
  int pp = 1;
  int tp = 1;

  int world() const { return dp * pp * tp; }
  std::string describe() const;  // "dp 2 × pp 1 × tp 2"
};

struct GridCoord {
  int dp = 0;
  int pp = 0;
  int tp = 0;

  bool operator==(const GridCoord&) const = default;
};

// Every axis at least 1 and the world within the tag's rank field.
Status grid_check(const Grid& grid);

GridCoord grid_coord(const Grid& grid, int rank);
int grid_rank(const Grid& grid, const GridCoord& coord);

Group world_group(const Grid& grid);
Group dp_group(const Grid& grid, int rank);
Group pp_group(const Grid& grid, int rank);
Group tp_group(const Grid& grid, int rank);
// The id of an axis's groups (the ids above) after `epoch` in-place recoveries: epoch 0 keeps the
// axis's id; epoch e > 0 takes 8·e + the axis's id, cycling through the tag's 12 bits every 511
// epochs, so that no late message of an abandoned epoch matches an operation of the next.
std::uint16_t epoch_group_id(std::uint16_t axis_id, int epoch);

// The context group of `rank` (context parallelism, `shards` > 1 dividing grid.dp): the `shards`
// consecutive places of the dp axis that hold one data replica's context shards (dp places
// shards·d … shards·d + shards − 1), at rank's stage and tensor shard, in dp order.
Group context_group(const Grid& grid, int rank, int shards);
// The expert group of `rank` (expert parallelism, `shards` EP > 1 dividing grid.dp): the EP
// consecutive places of the dp axis whose ranks split each MoE block's experts, in dp order. It is
// context_group's shape, and takes its id.
inline Group expert_group(const Grid& grid, int rank, int shards) { return context_group(grid, rank, shards); }

// DiLoCo's island of `rank` (`islands` K dividing grid.dp): the grid.dp / K consecutive places of the
// dp axis that hold it (island i: places i·dp/K … (i + 1)·dp/K − 1), at rank's stage and tensor shard,
// in dp order. It stands for rank's dp group (a diloco job sums each step's gradients over it, and
// never over the whole axis), so it takes the dp axis's id.
Group island_group(const Grid& grid, int rank, int islands);
// The ranks at rank's place in every island (K of them, island order): what an outer step sums over.
Group outer_group(const Grid& grid, int rank, int islands);
// Which island rank's is.
int island_of(const Grid& grid, int rank, int islands);
// The ranks at rank's place in every expert group (`shards` EP dividing grid.dp): the grid.dp / EP
// ranks that hold the same experts and sum their gradients. It is an outer group over expert groups
// as islands, and takes outer_group_id: a job has expert shards or DiLoCo islands, never both.
inline Group expert_data_group(const Grid& grid, int rank, int shards) {
  return outer_group(grid, rank, grid.dp / shards);
}

// The first and last pipeline stage of rank's replica, which share the tied embedding's
// gradient (pp >= 2; rank must be one of them).
Group embedding_group(const Grid& grid, int rank);

// Every rank that `rank` exchanges messages with in its dp, pp and tp groups (partners() of each,
// group.hpp; the embedding pair, first and last stage, are neighbours on the pp ring): the peers a
// rank connects to when the job starts; sorted, symmetric, without `rank`.
std::vector<int> grid_partners(const Grid& grid, int rank);

}  // namespace troupe::comm
