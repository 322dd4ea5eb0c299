// A rank killed in the middle of a collective: every survivor's operation fails with an error
// naming the lost rank within seconds, whether or not the lost rank is its ring neighbour.
// Survivors tear down with the failed operation's messages still unmatched, and UCX warns
// about each: large chunks keep those warnings few.

#include "rank_support.hpp"

#include <signal.h>

#include <future>
#include <thread>

using namespace troupe::comm;
using namespace troupe::comm::test;
using troupe::Error;
using troupe::Expected;
using troupe::Status;
using troupe::compute::DType;
using troupe::compute::Tensor;

namespace {

// Chunks of 8 MiB go as messages; chunks that fit a mapped block go through blocks between
// ranks on one host.
const CollectiveOptions as_messages{8 << 20, 2};
const CollectiveOptions through_blocks = CollectiveOptions::from_environment();

void kill_mid_all_reduce(int n, int victim, CollectiveOptions options = as_messages) {
  auto results = run_local_ranks(
      n,
      [victim, options](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
        auto comm = world(engine, options);
        if (!comm) return comm.error();
        Tensor buffer = Tensor::zeros({(64 << 20) / 4}, DType::f32);
        if (Status s = (*comm)->barrier(); !s) return s.error();
        std::promise<Status> done;
        const auto start = std::chrono::steady_clock::now();
        (*comm)->post_all_reduce(buffer, [&done](Status s) { done.set_value(std::move(s)); });
        if (engine.rank() == victim) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          raise(SIGKILL);
        }
        const Status s = done.get_future().get();
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (s.ok()) return Error{"the all-reduce succeeded without rank " + std::to_string(victim)};
        const std::string report = std::to_string(seconds) + " " + s.error().message;
        return std::vector<std::uint8_t>(report.begin(), report.end());
      },
      std::chrono::seconds(30));
  REQUIRE(results.ok());
  for (int r = 0; r < n; ++r) {
    const LocalRankResult& result = (*results)[r];
    INFO("rank " << r << ": " << result.error);
    if (r == victim) {
      CHECK(result.signal == SIGKILL);
      continue;
    }
    REQUIRE(result.ok);
    const std::string report(result.report.begin(), result.report.end());
    INFO(report);
    CHECK_THAT(report, Catch::Contains("all_reduce") && Catch::Contains("rank " + std::to_string(victim) + " lost"));
    CHECK(std::stod(report) < 5.0);
  }
}

}  // namespace

TEST_CASE("a rank killed mid-all-reduce fails both survivors' operation, naming it", "[failure]") {
  kill_mid_all_reduce(3, 2);
}

TEST_CASE("a rank killed mid-all-reduce fails every survivor's operation, neighbours or not", "[failure]") {
  kill_mid_all_reduce(4, 1);
}

TEST_CASE("a rank killed mid-all-reduce through mapped blocks fails every survivor's operation, naming it",
          "[failure]") {
  kill_mid_all_reduce(3, 1, through_blocks);
  kill_mid_all_reduce(4, 2, through_blocks);
}

TEST_CASE("a rank killed mid-all-reduce over TCP, as between hosts, fails the survivors' operation", "[failure][tcp]") {
  ScopedEnv tcp("UCX_TLS", "tcp,self");
  kill_mid_all_reduce(3, 0);
}
