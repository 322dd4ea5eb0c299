// The engine's point-to-point messages between real processes: matching by key and source,
// size checks, and a peer that dies.

#include "rank_support.hpp"

#include <signal.h>

#include <future>
#include <optional>
#include <thread>

using namespace troupe::comm;
using namespace troupe::comm::test;
using troupe::Error;
using troupe::Expected;
using troupe::Status;

namespace {

// Posts through `post` and waits for the callback.
template <typename Post>
Status wait(Post post) {
  std::promise<Status> promise;
  auto result = promise.get_future();
  post([&promise](Status s) { promise.set_value(std::move(s)); });
  return result.get();
}

MessageKey key(std::uint16_t index) { return MessageKey{MessageKind::point_to_point, 9, 0, index}; }

}  // namespace

TEST_CASE("engine creation rejects a rank outside the world", "[engine]") {
  CHECK_FALSE(Engine::create(2, 2).ok());
  CHECK_FALSE(Engine::create(-1, 2).ok());
  const auto none = Engine::create(0, 0);
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.error().message, Catch::Contains("world size 0"));
}

TEST_CASE("messages match by key and source rank, not by the order they were posted in", "[engine]") {
  run_ranks(3, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    const int me = engine.rank();
    // Every rank sends to every rank (itself included) two messages, keys 1 and 2, whose
    // contents name sender, receiver and key; receives are posted in the opposite order.
    std::vector<std::uint64_t> out, in(2 * engine.world_size(), 0);
    for (int peer = 0; peer < engine.world_size(); ++peer) {
      for (std::uint16_t k : {1, 2}) out.push_back(std::uint64_t(me) << 32 | std::uint64_t(peer) << 16 | k);
    }
    std::vector<std::future<Status>> pending;
    std::vector<std::promise<Status>> promises(4 * engine.world_size());
    int next = 0;
    auto callback = [&] {
      auto* promise = &promises[next++];
      pending.push_back(promise->get_future());
      return [promise](Status s) { promise->set_value(std::move(s)); };
    };
    for (int peer = engine.world_size() - 1; peer >= 0; --peer) {
      for (std::uint16_t k : {2, 1}) engine.post_recv(peer, key(k), &in[2 * peer + k - 1], 8, callback());
    }
    for (int peer = 0; peer < engine.world_size(); ++peer) {
      for (std::uint16_t k : {1, 2}) engine.post_send(peer, key(k), &out[2 * peer + k - 1], 8, callback());
    }
    for (auto& f : pending) {
      if (Status s = f.get(); !s) return s.error();
    }
    for (int peer = 0; peer < engine.world_size(); ++peer) {
      for (std::uint16_t k : {1, 2}) {
        const std::uint64_t want = std::uint64_t(peer) << 32 | std::uint64_t(me) << 16 | k;
        if (in[2 * peer + k - 1] != want)
          return Error{"message from rank " + std::to_string(peer) + " key " + std::to_string(k) + " mixed up"};
      }
    }
    return std::vector<std::uint8_t>{};
  });
}

TEST_CASE("a message of the wrong size fails the receive with both sizes and the peer named", "[engine]") {
  const auto reports = run_ranks(2, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    std::uint8_t bytes[16] = {};
    if (engine.rank() == 0) {
      if (Status s = wait([&](Callback cb) { engine.post_send(1, key(1), bytes, 8, cb); }); !s) return s.error();
      return std::vector<std::uint8_t>{};
    }
    const Status s = wait([&](Callback cb) { engine.post_recv(0, key(1), bytes, 16, cb); });
    if (s.ok()) return Error{"a short message was accepted"};
    return std::vector<std::uint8_t>(s.error().message.begin(), s.error().message.end());
  });
  const std::string message(reports[1].begin(), reports[1].end());
  CHECK_THAT(message, Catch::Contains("rank 0") && Catch::Contains("expected 16 bytes, got 8"));
}

TEST_CASE("a peer killed while a receive waits on it fails the receive naming it, within seconds",
          "[engine][failure]") {
  auto results = run_local_ranks(
      2,
      [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
        std::uint8_t byte = 0;
        if (engine.rank() == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          raise(SIGKILL);
        }
        const auto start = std::chrono::steady_clock::now();
        const Status s = wait([&](Callback cb) { engine.post_recv(0, key(1), &byte, 1, cb); });
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        if (s.ok()) return Error{"a receive from a dead peer succeeded"};
        std::string report = std::to_string(seconds) + " " + s.error().message;
        return std::vector<std::uint8_t>(report.begin(), report.end());
      },
      std::chrono::seconds(30));
  REQUIRE(results.ok());
  CHECK((*results)[0].signal == SIGKILL);
  const LocalRankResult& survivor = (*results)[1];
  INFO(survivor.error);
  REQUIRE(survivor.ok);
  const std::string report(survivor.report.begin(), survivor.report.end());
  INFO(report);
  CHECK_THAT(report, Catch::Contains("rank 0 lost"));
  CHECK(std::stod(report) < 5.0);
}

TEST_CASE("the oldest receive in flight names its peer and message until it completes", "[engine]") {
  run_ranks(2, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    if (engine.rank() == 1) {
      // Rank 0 looks at its pending receive first; this send comes after the barrier message.
      std::uint64_t go = 0, payload = 42;
      if (Status s = wait([&](Callback done) { engine.post_recv(0, key(1), &go, 8, std::move(done)); }); !s)
        return s.error();
      if (Status s = wait([&](Callback done) { engine.post_send(0, key(2), &payload, 8, std::move(done)); }); !s)
        return s.error();
      return std::vector<std::uint8_t>{};
    }
    if (engine.oldest_pending_receive()) return Error{"a receive is pending before any was posted"};
    std::uint64_t go = 1, payload = 0;
    std::promise<Status> received;
    engine.post_recv(1, key(2), &payload, 8, [&](Status s) { received.set_value(std::move(s)); });
    // The post reaches the progress thread asynchronously.
    std::optional<PendingReceive> pending;
    for (int i = 0; i < 1000 && !pending; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      pending = engine.oldest_pending_receive();
    }
    if (!pending) return Error{"the posted receive is not reported as pending"};
    const std::string text = describe(*pending, std::chrono::steady_clock::now());
    if (pending->peer != 1 || !(pending->key == key(2)) || pending->bytes != 8)
      return Error{"the pending receive is reported wrongly: " + text};
    if (text.find("point-to-point message 2 of operation 0 in group 9 (8 bytes) from rank 1, waiting") != 0)
      return Error{"unexpected description: " + text};
    if (Status s = wait([&](Callback done) { engine.post_send(1, key(1), &go, 8, std::move(done)); }); !s)
      return s.error();
    if (Status s = received.get_future().get(); !s) return s.error();
    if (engine.oldest_pending_receive()) return Error{"a completed receive is still reported as pending"};
    return std::vector<std::uint8_t>{};
  });
}
