// A collective given up by its survivors (an in-place recovery abandons the failed step): every
// abandoned operation ends with an error saying so, and the group goes on under a new id, where no
// late message of the abandoned operation can match a new one.

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
    (*comm)->abandon_and_renew("rank 0 failed", epoch_group_id(0, 1));
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
