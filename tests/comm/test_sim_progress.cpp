// A simulated rank's progress thread (comm/engine.cpp, docs/comm.md "A simulated rank's
// progress"): its messages of real bytes go eagerly, so a send is done once UCX has copied it and
// never waits for the peer's thread to be scheduled; and with only receives in flight it sleeps on
// the worker's event fd rather than waking every few milliseconds, so an arrival must wake it.

#include "rank_support.hpp"

#include <chrono>
#include <future>

using namespace troupe::comm;
using namespace troupe::comm::test;
using troupe::Error;
using troupe::Expected;
using troupe::Status;

namespace {

// Two ranks of a simulated job on one host: the engine takes the wire model's settings.
void run_simulated(const LocalRankBody& body) {
  WireModel wire;
  wire.local_ranks = 2;
  run_ranks(2, body, std::chrono::seconds(60), wire);
}

// The largest message of real bytes a simulated rank sends: from 64 KiB a tensor moves as a token
// (compute/tensor.hpp).
constexpr std::size_t largest_real_message = 60 * 1024;

}  // namespace

TEST_CASE("a simulated rank's send of real bytes is done before its peer posts the receive", "[sim][comm]") {
  const auto body = [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    const int peer = 1 - engine.rank();
    const MessageKey data_key{MessageKind::point_to_point, 1, 0, 0};
    const MessageKey go_key{MessageKind::point_to_point, 1, 0, 1};
    std::vector<std::uint8_t> bytes(largest_real_message);
    if (engine.rank() == 0) {
      for (std::size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<std::uint8_t>(i * 7);
      std::promise<Status> sent;
      engine.post_send(peer, data_key, bytes.data(), bytes.size(), [&](Status s) { sent.set_value(s); });
      // A rendezvous send would wait here for a receive the peer posts only after "go".
      auto done = sent.get_future();
      if (done.wait_for(std::chrono::seconds(20)) != std::future_status::ready)
        return Error{"a 60 KiB send waited for its receive: it went by rendezvous, not eagerly"};
      if (Status s = done.get(); !s) return s.error();
      std::promise<Status> go;
      engine.post_token_send(peer, go_key, 8, [&](Status s) { go.set_value(s); });
      if (Status s = go.get_future().get(); !s) return s.error();
      return std::vector<std::uint8_t>{};
    }
    std::promise<Status> go;
    engine.post_token_recv(peer, go_key, 8, [&](Status s) { go.set_value(s); });
    auto arrived = go.get_future();
    if (arrived.wait_for(std::chrono::seconds(30)) != std::future_status::ready)
      return Error{"rank 0's word that its send was done never came"};
    if (Status s = arrived.get(); !s) return s.error();
    std::promise<Status> received;
    engine.post_recv(peer, data_key, bytes.data(), bytes.size(), [&](Status s) { received.set_value(s); });
    if (Status s = received.get_future().get(); !s) return s.error();
    for (std::size_t i = 0; i < bytes.size(); ++i)
      if (bytes[i] != static_cast<std::uint8_t>(i * 7)) return wrong("a received byte", bytes[i], i * 7 % 256);
    return std::vector<std::uint8_t>{};
  };
  run_simulated(body);
}

TEST_CASE("a simulated rank waiting only for receives is woken by each arrival", "[sim][comm]") {
  // 20 round trips, each a receive posted before its message comes: woken by the arrival they take
  // milliseconds; were an arrival left to the next timed wake-up (a second with nothing else in
  // flight) they would take 20 s or more.
  constexpr int round_trips = 20;
  const auto body = [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    const int peer = 1 - engine.rank();
    const auto start = std::chrono::steady_clock::now();
    for (int trip = 0; trip < round_trips; ++trip) {
      const MessageKey ping{MessageKind::point_to_point, 2, static_cast<std::uint16_t>(trip), 0};
      const MessageKey pong{MessageKind::point_to_point, 2, static_cast<std::uint16_t>(trip), 1};
      std::promise<Status> sent, received;
      if (engine.rank() == 0) {
        engine.post_token_recv(peer, pong, 8, [&](Status s) { received.set_value(s); });
        engine.post_token_send(peer, ping, 8, [&](Status s) { sent.set_value(s); });
      } else {
        engine.post_token_recv(peer, ping, 8, [&](Status s) { received.set_value(s); });
        if (Status s = received.get_future().get(); !s) return s.error();
        engine.post_token_send(peer, pong, 8, [&](Status s) { sent.set_value(s); });
        if (Status s = sent.get_future().get(); !s) return s.error();
        continue;
      }
      if (Status s = sent.get_future().get(); !s) return s.error();
      if (Status s = received.get_future().get(); !s) return s.error();
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds > 10) return Error{"20 round trips took " + std::to_string(seconds) + " s (under 10 s wanted)"};
    return std::vector<std::uint8_t>{};
  };
  run_simulated(body);
}
