// The NCCL bootstrap of a node's ranks, as far as it runs without a GPU: NCCL makes unique ids
// without a device, so which ranks lead which data-parallel group, and what a rank says when the
// start message lacks its group's id, are checked here.

#include <catch2/catch.hpp>

#include "actors/worker/device_groups.hpp"
#include "compute/cpu/cpu_backend.hpp"

using namespace troupe;
using namespace troupe::actors;
using Catch::Contains;

#ifdef TROUPE_HAVE_CUDA

TEST_CASE("each data-parallel group's leader makes one 128-byte NCCL id", "[config]") {
  // dp 2 x pp 2 (rank = dp + 2 pp): the data-parallel groups are [0 1] and [2 3].
  const comm::Grid grid{2, 2, 1};
  auto first = lead_device_groups(grid, 0, 2);
  auto second = lead_device_groups(grid, 2, 2);
  REQUIRE(first.ok());
  REQUIRE(second.ok());
  REQUIRE(first->size() == 1);
  REQUIRE(second->size() == 1);
  CHECK(((*first)[0].group == comm::dp_group_id && (*first)[0].leader_rank == 0));
  CHECK(((*second)[0].group == comm::dp_group_id && (*second)[0].leader_rank == 2));
  CHECK((*first)[0].id.bytes.size() == 128);
  CHECK((*first)[0].id.bytes != (*second)[0].id.bytes);
  auto follower = lead_device_groups(grid, 1, 1);
  REQUIRE(follower.ok());
  CHECK(follower->empty());
}

TEST_CASE("a rank whose group id is missing from the start message says which group and leader", "[config]") {
  actors::start_msg start;
  start.world_size = 2;
  start.nodes.push_back({0, 0, 1, "a", {actors::byte_blob{}}, {}});
  start.nodes.push_back({1, 1, 1, "b", {actors::byte_blob{}}, {}});
  compute::CpuBackend cpu(1);
  auto joined = DeviceGroup::join(start, comm::Grid{2, 1, 1}, 1, cpu);
  REQUIRE_FALSE(joined.ok());
  CHECK(joined.error().message == "rank 1: the start message has no NCCL id for group 1 [0 1] from its leader, rank 0");
}

#else

TEST_CASE("a build without CUDA refuses the device groups with one line", "[config]") {
  auto ids = lead_device_groups(comm::Grid{2, 1, 1}, 0, 1);
  REQUIRE_FALSE(ids.ok());
  CHECK_THAT(ids.error().message, Contains("no CUDA support"));
}

#endif
