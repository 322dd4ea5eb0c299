// A collective given up by its survivors (an in-place recovery abandons the failed step): every
// abandoned operation ends with an error saying so, and the group goes on under a new id, where no
// late message of the abandoned operation can match a new one; where the job grows in place, over
// more ranks.

#include "rank_support.hpp"

#include <future>
#include <set>
#include <thread>

#include "comm/grid.hpp"

using namespace troupe::comm;
using namespace troupe::comm::test;
using troupe::Error;
using troupe::Expected;
using troupe::Status;
using troupe::compute::DType;
using troupe::compute::Tensor;

namespace {

// Rank 0 plays the failed worker: it never joins the first all-reduce. The others post it with
// 1000 in every element, wait, and abandon it; then every rank sums rank + 1 under the next
// epoch's id. A stale message matched by the new sum would put a thousand into it.
void abandon_then_sum(CollectiveOptions options) {
  const int n = 3;
  const std::int64_t count = 300007;
  auto results = run_local_ranks(n, [options, count](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    auto comm = world(engine, options);
    if (!comm) return comm.error();
    if (Status s = (*comm)->barrier(); !s) return s.error();
    std::promise<Status> abandoned;
    if (engine.rank() != 0) {
      Tensor stale = Tensor::zeros({count}, DType::f32);
      for (std::int64_t i = 0; i < count; ++i) stale.data_as<float>()[i] = 1000;
      (*comm)->post_all_reduce(stale, [&abandoned](Status s) { abandoned.set_value(std::move(s)); });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    (*comm)->abandon_and_renew("rank 0 failed", {epoch_group_id(0, 1), (*comm)->group().ranks});
    std::string first;
    if (engine.rank() != 0) {
      const Status s = abandoned.get_future().get();
      if (s.ok()) return Error{"the abandoned all-reduce succeeded"};
      first = s.error().message;
    }
    Tensor sum = Tensor::zeros({count}, DType::f32);
    for (std::int64_t i = 0; i < count; ++i) sum.data_as<float>()[i] = static_cast<float>(engine.rank() + 1);
    if (Status s = (*comm)->all_reduce(sum); !s) return s.error();
    for (std::int64_t i = 0; i < count; ++i)
      if (sum.data_as<float>()[i] != 6.0f)
        return Error{"element " + std::to_string(i) + " is " + std::to_string(sum.data_as<float>()[i]) + ", not 6"};
    return std::vector<std::uint8_t>(first.begin(), first.end());
  }, std::chrono::seconds(30));
  REQUIRE(results.ok());
  for (int r = 0; r < n; ++r) {
    INFO("rank " << r << ": " << (*results)[r].error);
    CHECK((*results)[r].ok);
  }
  for (int r = 1; r < n; ++r) {
    const std::string first((*results)[r].report.begin(), (*results)[r].report.end());
    INFO("rank " << r << ": " << first);
    CHECK_THAT(first, Catch::Contains("all_reduce") && Catch::Contains("abandoned: rank 0 failed"));
  }
}

}  // namespace

TEST_CASE("an abandoned all-reduce fails with the reason, and the next epoch's sum is exact", "[collectives][abandon]") {
  SECTION("chunks as messages") { abandon_then_sum(CollectiveOptions{16384, 3}); }
  SECTION("chunks through mapped blocks") { abandon_then_sum(CollectiveOptions::from_environment()); }
}

// Ranks 0 and 1 sum in a world of 2, then a third rank starts in a world of 3: the two grow their
// engines' world, connect to it, and renew their group over all three under the next epoch's id;
// the sum then holds every rank's part. Threads of one process, as a node's slots are.
TEST_CASE("a group renewed over a grown world sums over every rank of it", "[collectives][abandon]") {
  std::vector<std::unique_ptr<Engine>> engines;
  for (int rank = 0; rank < 3; ++rank) {
    auto engine = Engine::create(rank, rank < 2 ? 2 : 3);
    REQUIRE(engine.ok());
    engines.push_back(std::move(*engine));
  }
  REQUIRE(engines[0]->connect(1, engines[1]->address()).ok());
  REQUIRE(engines[1]->connect(0, engines[0]->address()).ok());
  const std::int64_t count = 100003;
  std::vector<std::string> errors(3);
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 3; ++rank)
    ranks.emplace_back([&, rank] {
      Engine& engine = *engines[static_cast<std::size_t>(rank)];
      auto fail = [&](const std::string& what) { errors[static_cast<std::size_t>(rank)] = what; };
      std::unique_ptr<Communicator> comm;
      if (rank < 2) {
        auto created = Communicator::create(engine, {dp_group_id, {0, 1}});
        if (!created) return fail(created.error().message);
        comm = std::move(*created);
        Tensor pair = Tensor::zeros({count}, DType::f32);
        for (std::int64_t i = 0; i < count; ++i) pair.data_as<float>()[i] = 1.0f;
        if (Status s = comm->all_reduce(pair); !s) return fail(s.error().message);
        if (pair.data_as<float>()[count - 1] != 2.0f) return fail("the pair's sum is not 2");
        engine.grow_world(3);
        if (engine.world_size() != 3) return fail("the world did not grow to 3");
        if (Status s = engine.connect(2, engines[2]->address()); !s) return fail(s.error().message);
        comm->abandon_and_renew("the job grew", {epoch_group_id(dp_group_id, 1), {0, 1, 2}});
        if (comm->group().size() != 3 || comm->position() != rank) return fail("the renewed group is not [0 1 2]");
      } else {
        for (int peer : {0, 1})
          if (Status s = engine.connect(peer, engines[static_cast<std::size_t>(peer)]->address()); !s)
            return fail(s.error().message);
        auto created = Communicator::create(engine, {epoch_group_id(dp_group_id, 1), {0, 1, 2}});
        if (!created) return fail(created.error().message);
        comm = std::move(*created);
      }
      Tensor sum = Tensor::zeros({count}, DType::f32);
      for (std::int64_t i = 0; i < count; ++i) sum.data_as<float>()[i] = static_cast<float>(rank + 1);
      if (Status s = comm->all_reduce(sum); !s) return fail(s.error().message);
      for (std::int64_t i = 0; i < count; ++i)
        if (sum.data_as<float>()[i] != 6.0f)
          return fail("element " + std::to_string(i) + " is " + std::to_string(sum.data_as<float>()[i]) + ", not 6");
    });
  for (std::thread& rank : ranks) rank.join();
  for (int rank = 0; rank < 3; ++rank) {
    INFO("rank " << rank);
    CHECK(errors[static_cast<std::size_t>(rank)].empty());
    if (!errors[static_cast<std::size_t>(rank)].empty()) WARN(errors[static_cast<std::size_t>(rank)]);
  }
}

TEST_CASE("each epoch of an axis gets a group id of its own within the tag's 12 bits", "[grid][abandon]") {
  CHECK(epoch_group_id(dp_group_id, 0) == dp_group_id);
  std::set<std::uint16_t> seen;
  for (int epoch = 0; epoch < 511; ++epoch)
    for (std::uint16_t axis : {world_group_id, dp_group_id, pp_group_id, tp_group_id, embedding_group_id}) {
      const std::uint16_t id = epoch_group_id(axis, epoch);
      CHECK(id <= max_group_id);
      CHECK(seen.insert(id).second);
    }
  CHECK(epoch_group_id(dp_group_id, 512) == epoch_group_id(dp_group_id, 1));
}
