// The block arena: distinct blocks while there are free ones, then waiters served in order as
// blocks come back.

#include <catch2/catch.hpp>

#include <set>
#include <vector>

#include "comm/block_arena.hpp"

using namespace troupe::comm;

TEST_CASE("the block arena hands out distinct blocks, then serves waiters in turn", "[arena]") {
  std::vector<std::byte> region(4 * 64);
  BlockArena arena(region.data(), 64, 4);
  CHECK(arena.block_bytes() == 64);

  std::vector<MappedBlock> taken;
  for (int i = 0; i < 4; ++i) arena.take([&](MappedBlock b) { taken.push_back(b); });
  REQUIRE(taken.size() == 4);
  std::set<std::uint64_t> offsets;
  for (const MappedBlock& b : taken) {
    CHECK(b.offset % 64 == 0);
    CHECK(b.offset < region.size());
    CHECK(b.data == region.data() + b.offset);
    offsets.insert(b.offset);
  }
  CHECK(offsets.size() == 4);

  // No block free: the next two wait, and are served first come, first served.
  std::vector<int> served;
  arena.take([&](MappedBlock b) {
    served.push_back(1);
    CHECK(b.offset == taken[2].offset);
  });
  arena.take([&](MappedBlock b) {
    served.push_back(2);
    CHECK(b.offset == taken[0].offset);
  });
  CHECK(served.empty());
  arena.give_back(taken[2].offset);
  CHECK(served == std::vector<int>{1});
  arena.give_back(taken[0].offset);
  CHECK(served == std::vector<int>{1, 2});

  // With nobody waiting a block given back is free again at once.
  arena.give_back(taken[1].offset);
  bool got = false;
  arena.take([&](MappedBlock b) { got = b.offset == taken[1].offset; });
  CHECK(got);
}
