// Token messages (comm/engine.hpp): a token tensor's messages carry its size alone. The size is
// what the traffic counts and the wire model charges, a receive of another size fails as a
// receive of the wrong size does, and a collective over a token buffer adds nothing into it, so a
// gibibyte's all-reduce leaves the rank's resident memory where it was.

#include "rank_support.hpp"

#include <future>

#include "compute/resident_memory.hpp"

using namespace troupe::comm;
using namespace troupe::comm::test;
using troupe::Error;
using troupe::Expected;
using troupe::Status;
using troupe::compute::DType;
using troupe::compute::Tensor;

namespace {

constexpr std::size_t gibibyte = std::size_t{1} << 30;

Status exchange_tokens(Engine& engine, std::size_t sent_bytes, std::size_t expected_bytes) {
  const int peer = 1 - engine.rank();
  std::promise<Status> sent, received;
  engine.post_token_send(peer, MessageKey{}, sent_bytes, [&](Status s) { sent.set_value(s); });
  engine.post_token_recv(peer, MessageKey{}, expected_bytes, [&](Status s) { received.set_value(s); });
  if (auto s = sent.get_future().get(); !s) return s;
  return received.get_future().get();
}

}  // namespace

TEST_CASE("token messages: a gibibyte's message crosses as its size, counted as a gibibyte", "[token]") {
  run_ranks(2, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    if (auto s = exchange_tokens(engine, gibibyte, gibibyte); !s) return s.error();
    const Traffic& traffic = *engine.traffic();
    for (TrafficKind kind : {TrafficKind::send, TrafficKind::recv}) {
      if (traffic.totals(kind).operations != 1) return wrong(traffic_name(kind), traffic.totals(kind).operations, 1);
      if (traffic.totals(kind).bytes != gibibyte)
        return wrong(traffic_name(kind), traffic.totals(kind).bytes, gibibyte);
    }
    return std::vector<std::uint8_t>{};
  });
}

TEST_CASE("token messages: a receive of another size fails naming both sizes, as a real one does", "[token]") {
  run_ranks(2, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    const Status s = exchange_tokens(engine, 4096, 8192);
    if (s) return Error{"a token receive of 8192 bytes took a message of 4096"};
    if (s.error().message.find("expected 8192 bytes, got 4096") == std::string::npos)
      return Error{"unexpected error: " + s.error().message};
    return std::vector<std::uint8_t>{};
  });
}

TEST_CASE("token messages: a real receive does not take a token message", "[token]") {
  run_ranks(2, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    const int peer = 1 - engine.rank();
    std::vector<float> in(1024);
    std::promise<Status> sent, received;
    engine.post_token_send(peer, MessageKey{}, in.size() * sizeof(float), [&](Status s) { sent.set_value(s); });
    engine.post_recv(peer, MessageKey{}, in.data(), in.size() * sizeof(float),
                     [&](Status s) { received.set_value(s); });
    static_cast<void>(sent.get_future().get());
    const Status s = received.get_future().get();
    if (s) return Error{"a receive of 4096 bytes took a token message"};
    if (s.error().message.find("expected 4096 bytes, got 8") == std::string::npos)
      return Error{"unexpected error: " + s.error().message};
    return std::vector<std::uint8_t>{};
  });
}

TEST_CASE("token messages: each takes the wire model's time for the size it stands for", "[token]") {
  // 256 MiB at 1 GB/s: a quarter of a second a message on the sender's link, which no 8-byte
  // message takes on its own.
  WireModel wire;
  wire.local_ranks = 2;
  wire.bandwidth_intra = wire.bandwidth_inter = 1e9;
  const auto body = [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    const auto start = std::chrono::steady_clock::now();
    if (auto s = exchange_tokens(engine, 256 << 20, 256 << 20); !s) return s.error();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (seconds < 0.25) return Error{"a 256 MiB token message took " + std::to_string(seconds) + " s at 1 GB/s"};
    return std::vector<std::uint8_t>{};
  };
  run_ranks(2, body, std::chrono::seconds(30), wire);
}

TEST_CASE("a collective over a token buffer counts its size and leaves the rank's memory as it was",
          "[token][collectives]") {
  for (AllReduceAlgorithm algorithm : {AllReduceAlgorithm::ring, AllReduceAlgorithm::recursive_doubling}) {
    for (int ranks : {2, 3}) {
      INFO((algorithm == AllReduceAlgorithm::ring ? "ring" : "recursive doubling") << " on " << ranks << " ranks");
      run_ranks(ranks, [algorithm](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
        CollectiveOptions options = CollectiveOptions::from_environment();
        options.all_reduce = algorithm;
        auto comm = world(engine, options);
        if (!comm) return comm.error();
        const std::uint64_t resident_before = troupe::compute::resident_bytes();
        Tensor grads = Tensor::token({static_cast<std::int64_t>(gibibyte / 4)}, DType::f32);
        if (auto s = (*comm)->all_reduce(grads); !s) return s.error();
        if (auto s = (*comm)->reduce_scatter(grads); !s) return s.error();
        if (auto s = (*comm)->all_gather(grads); !s) return s.error();
        const std::uint64_t resident_after = troupe::compute::resident_bytes();
        if (resident_after > resident_before + (64u << 20))
          return wrong("resident bytes after a gibibyte's collectives", resident_after, resident_before + (64u << 20));
        const Traffic& traffic = *engine.traffic();
        for (TrafficKind kind : {TrafficKind::all_reduce, TrafficKind::reduce_scatter, TrafficKind::all_gather})
          if (traffic.totals(kind).bytes != gibibyte)
            return wrong(traffic_name(kind), traffic.totals(kind).bytes, gibibyte);
        return std::vector<std::uint8_t>{};
      });
    }
  }
}
