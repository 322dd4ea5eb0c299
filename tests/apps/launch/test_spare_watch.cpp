// The watch that grows a shrunk job onto a new spare line (apps/launch/spare_watch.hpp): it reads
// the host file again and again, and only a spare line that was not there, with slots for a node
// left out, calls for a grow.

#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <thread>

#include "apps/launch/spare_watch.hpp"
#include "support/temp_dir.hpp"

using namespace troupe;
using namespace troupe::launch;
using namespace std::chrono_literals;

namespace {

void append(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::app);
  out << text;
}

// Waits up to 5 s for `done`.
template <class Done>
bool within_5s(Done done) {
  for (const auto deadline = std::chrono::steady_clock::now() + 5s; std::chrono::steady_clock::now() < deadline;
       std::this_thread::sleep_for(5ms))
    if (done()) return true;
  return done();
}

}  // namespace

TEST_CASE("a new spare line with slots for a node left out calls for a grow, again after the retry period, and "
          "known, too small or half-written lines do not",
          "[hostfile]") {
  test::TempDir dir;
  const std::string hosts = dir.write("hosts", "h0 slots=1\nh1 slots=2\nh2 slots=1 spare\n");
  std::mutex mutex;
  std::vector<std::vector<HostEntry>> calls;
  SpareWatch watch({hosts, {{"h2", 1, 3}}, {2}, [&](const std::vector<HostEntry>& found) {
                      std::lock_guard lock(mutex);
                      calls.push_back(found);
                    },
                    10ms, 200ms});
  auto called = [&] {
    std::lock_guard lock(mutex);
    return calls.size();
  };
  watch.start();
  // The known spare, a second line of one slot (node 1 needs 2) and a line cut short: nothing.
  append(hosts, "h3 slots=1 spare\nh4 slots=");
  std::this_thread::sleep_for(100ms);
  CHECK(called() == 0);
  CHECK(watch.found().empty());
  append(hosts, "2 spare\n");
  REQUIRE(within_5s([&] { return called() >= 1; }));
  {
    std::lock_guard lock(mutex);
    REQUIRE(calls[0].size() == 1);
    CHECK((calls[0][0].host == "h4" && calls[0][0].slots == 2 && calls[0][0].line == 5));
  }
  // Until it stops, the order is repeated every retry period, not every read.
  std::this_thread::sleep_for(300ms);
  CHECK(called() >= 2);
  CHECK(called() <= 3);
  watch.stop();
  const std::size_t after_stop = called();
  std::this_thread::sleep_for(100ms);
  CHECK(called() == after_stop);
  REQUIRE(watch.found().size() == 1);
  CHECK(watch.found()[0].host == "h4");
}

TEST_CASE("a second spare line for a host already known as a spare is new, and without a node left out nothing is "
          "watched",
          "[hostfile]") {
  test::TempDir dir;
  const std::string hosts = dir.write("hosts", "h0 slots=1\nh2 slots=1 spare\n");
  std::atomic<int> calls{0};
  SpareWatch watch({hosts, {{"h2", 1, 2}}, {1}, [&](const std::vector<HostEntry>&) { ++calls; }, 10ms, 1000ms});
  watch.start();
  append(hosts, "h2 slots=1 spare\n");
  REQUIRE(within_5s([&] { return calls.load() == 1; }));
  watch.stop();
  REQUIRE(watch.found().size() == 1);
  CHECK(watch.found()[0].line == 3);

  std::atomic<int> idle_calls{0};
  SpareWatch idle({hosts, {}, {}, [&](const std::vector<HostEntry>&) { ++idle_calls; }, 10ms, 10ms});
  idle.start();
  std::this_thread::sleep_for(100ms);
  idle.stop();
  CHECK(idle_calls.load() == 0);
}
