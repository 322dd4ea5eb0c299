// The process grid and group arithmetic: pure functions, no processes.

#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "comm/grid.hpp"
#include "comm/ring.hpp"

using namespace troupe::comm;

TEST_CASE("grid ranks run tp fastest, then dp, then pp (Megatron tp-dp-pp)", "[grid]") {
  const Grid grid{2, 3, 4};
  REQUIRE(grid_check(grid).ok());
  CHECK(grid.world() == 24);
  CHECK(grid_coord(grid, 0) == GridCoord{0, 0, 0});
  CHECK(grid_coord(grid, 1) == GridCoord{0, 0, 1});
  CHECK(grid_coord(grid, 4) == GridCoord{1, 0, 0});
  CHECK(grid_coord(grid, 5) == GridCoord{1, 0, 1});
  CHECK(grid_coord(grid, 8) == GridCoord{0, 1, 0});
  CHECK(grid_coord(grid, 13) == GridCoord{1, 1, 1});
  CHECK(grid_coord(grid, 23) == GridCoord{1, 2, 3});
  for (int r = 0; r < grid.world(); ++r) CHECK(grid_rank(grid, grid_coord(grid, r)) == r);
}

TEST_CASE("a rank's dp, pp and tp groups vary one coordinate and keep the others", "[grid]") {
  const Grid grid{2, 3, 4};
  CHECK(dp_group(grid, 5).ranks == std::vector<int>{1, 5});
  CHECK(pp_group(grid, 5).ranks == std::vector<int>{5, 13, 21});
  CHECK(tp_group(grid, 5).ranks == std::vector<int>{4, 5, 6, 7});
  CHECK(world_group(grid).size() == 24);
  CHECK(dp_group(grid, 5).id == dp_group_id);
  CHECK(pp_group(grid, 5).id == pp_group_id);
  CHECK(tp_group(grid, 5).id == tp_group_id);
  CHECK(world_group(grid).id == world_group_id);
  CHECK(tp_group_id < first_free_group_id);

  using Axis = Group (*)(const Grid&, int);
  for (Axis axis : {Axis{dp_group}, Axis{pp_group}, Axis{tp_group}}) {
    std::set<std::vector<int>> groups;
    for (int r = 0; r < grid.world(); ++r) {
      const Group g = axis(grid, r);
      CHECK(g.position_of(r) >= 0);
      // Every member sees the same group, in the same ring order.
      for (int member : g.ranks) CHECK(axis(grid, member).ranks == g.ranks);
      groups.insert(g.ranks);
    }
    std::size_t covered = 0;
    for (const auto& g : groups) covered += g.size();
    CHECK(covered == static_cast<std::size_t>(grid.world()));  // a partition of the world
  }
  // Groups of different axes share at most one rank, so one id per axis keeps tags apart.
  for (int r = 0; r < grid.world(); ++r) {
    for (int s = 0; s < grid.world(); ++s) {
      if (r == s) continue;
      const int shared = (dp_group(grid, r).position_of(s) >= 0) + (pp_group(grid, r).position_of(s) >= 0) +
                         (tp_group(grid, r).position_of(s) >= 0);
      CHECK(shared <= 1);
    }
  }
}

TEST_CASE("degenerate grids and bad shapes", "[grid]") {
  const Grid single{1, 1, 1};
  REQUIRE(grid_check(single).ok());
  CHECK(dp_group(single, 0).ranks == std::vector<int>{0});
  const Grid dp_only{4, 1, 1};
  CHECK(dp_group(dp_only, 2).ranks == std::vector<int>{0, 1, 2, 3});
  CHECK(tp_group(dp_only, 2).ranks == std::vector<int>{2});
  const auto zero = grid_check(Grid{0, 1, 1});
  REQUIRE_FALSE(zero.ok());
  CHECK_THAT(zero.error().message, Catch::Contains("at least 1"));
  CHECK_FALSE(grid_check(Grid{1024, 1024, 1}).ok());
}

TEST_CASE("segments split a buffer evenly, the first ones one element longer", "[grid]") {
  for (std::int64_t count : {0, 1, 7, 1000003}) {
    for (int parts = 1; parts <= 5; ++parts) {
      std::int64_t next = 0;
      for (int p = 0; p < parts; ++p) {
        const Slice s = segment_of(count, parts, p);
        CHECK(s.offset == next);
        CHECK(s.count == count / parts + (p < count % parts ? 1 : 0));
        next += s.count;
      }
      CHECK(next == count);
    }
  }
}

TEST_CASE("ring chunks grow so an operation never needs more message indices than the tag has", "[grid]") {
  CHECK(ring_chunk_elements(1000, 4, RingPhases::all_reduce, 64) == 64);
  const std::int64_t huge = std::int64_t{1} << 32;
  for (int ranks : {2, 3, 64}) {
    for (RingPhases phases : {RingPhases::all_reduce, RingPhases::reduce_scatter}) {
      const std::int64_t largest = segment_of(huge, ranks, 0).count;
      const std::int64_t chunk = ring_chunk_elements(largest, ranks, phases, 1);
      const std::int64_t chunks = (largest + chunk - 1) / chunk;
      // Each message may have an acknowledgement of its own (chunks through mapped blocks).
      const int steps = (phases == RingPhases::all_reduce ? 2 : 1) * (ranks - 1);
      CHECK(2 * chunks * steps <= max_messages_per_operation);
    }
  }
}

TEST_CASE("the embedding group pairs the first and last stage of one replica", "[grid]") {
  const Grid grid{2, 3, 1};  // rank = dp + 2 * pp
  const Group g = embedding_group(grid, 5);  // dp 1, pp 2
  CHECK(g.id == embedding_group_id);
  CHECK(g.ranks == std::vector<int>{1, 5});
  CHECK(embedding_group(grid, 0).ranks == std::vector<int>{0, 4});
}

TEST_CASE("a DiLoCo island is consecutive dp places, and its outer group the same place in every island", "[grid]") {
  const Grid grid{6, 1, 2};                       // rank = tp + 2 * dp; 3 islands of 2 dp places
  const Group island = island_group(grid, 7, 3);  // tp 1, dp 3: island 1 (dp 2 and 3)
  CHECK(island.id == dp_group_id);
  CHECK(island.ranks == std::vector<int>{5, 7});
  CHECK(island_of(grid, 7, 3) == 1);
  const Group outer = outer_group(grid, 7, 3);  // place 1 of islands 0, 1, 2: dp 1, 3, 5
  CHECK(outer.id == outer_group_id);
  CHECK(outer.ranks == std::vector<int>{3, 7, 11});
  CHECK(outer_group(grid, 0, 3).ranks == std::vector<int>{0, 4, 8});
  // One island is the dp group; one replica per island makes the outer group the dp axis.
  CHECK(island_group(grid, 7, 1).ranks == dp_group(grid, 7).ranks);
  CHECK(outer_group(grid, 7, 6).ranks == dp_group(grid, 7).ranks);
  CHECK(island_group(grid, 7, 6).ranks == std::vector<int>{7});
}

TEST_CASE("a context group is a replica's consecutive dp places at the rank's stage and tensor shard", "[grid]") {
  const Grid grid{4, 2, 2};                    // rank = tp + 2 * (dp + 4 * pp)
  const Group g = context_group(grid, 13, 2);  // tp 1, dp 2, pp 1
  CHECK(g.id == context_group_id);
  CHECK(g.ranks == std::vector<int>{13, 15});  // dp 2 and 3
  CHECK(context_group(grid, 0, 2).ranks == std::vector<int>{0, 2});
  CHECK(context_group(grid, 6, 4).ranks == std::vector<int>{0, 2, 4, 6});
  CHECK(context_group(Grid{4, 1, 1}, 3, 2).ranks == std::vector<int>{2, 3});
  CHECK(context_group(grid, 9, 1).ranks == std::vector<int>{9});
}

TEST_CASE("a rank's partners in a group are its ring neighbours and its barrier's, symmetric and 2 log2 n at most",
          "[grid]") {
  const Group eight{1, {10, 11, 12, 13, 14, 15, 16, 17}};
  CHECK(partners(eight, 10) == std::vector<int>{11, 12, 14, 16, 17});
  CHECK(partners(eight, 9).empty());
  CHECK(partners(Group{1, {5}}, 5).empty());
  CHECK(partners(Group{1, {5, 6}}, 5) == std::vector<int>{6});
  for (int n = 1; n <= 70; ++n) {
    Group group{1, {}};
    for (int r = 0; r < n; ++r) group.ranks.push_back(3 * r);
    int bound = 0;
    for (int d = 1; d < n; d *= 2) bound += 2;
    for (int r : group.ranks) {
      const std::vector<int> mine = partners(group, r);
      INFO("n " << n << ", rank " << r);
      CHECK(static_cast<int>(mine.size()) <= bound);
      CHECK(std::is_sorted(mine.begin(), mine.end()));
      for (int p : mine) {
        const std::vector<int> theirs = partners(group, p);
        CHECK(std::find(theirs.begin(), theirs.end(), r) != theirs.end());
      }
    }
  }
}

TEST_CASE("a rank's grid partners join its dp, pp and tp groups' partners", "[grid]") {
  const Grid grid{8, 3, 2};
  for (int rank = 0; rank < grid.world(); ++rank) {
    const std::vector<int> mine = grid_partners(grid, rank);
    std::set<int> expected;
    for (const Group& group : {dp_group(grid, rank), pp_group(grid, rank), tp_group(grid, rank)})
      for (int p : partners(group, rank)) expected.insert(p);
    CHECK(mine == std::vector<int>(expected.begin(), expected.end()));
    for (int p : mine) {
      const std::vector<int> theirs = grid_partners(grid, p);
      CHECK(std::find(theirs.begin(), theirs.end(), rank) != theirs.end());
    }
  }
  CHECK(grid_partners(Grid{1, 1, 1}, 0).empty());
}
