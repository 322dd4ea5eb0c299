// What a context layer costs a rank: the values context_layer_cost says it sends in a forward and a
// backward equal the bytes the rank hands its exchange (docs/context-parallel.md, "Messages"), for
// both methods at C = 2 and 4; one rank sends nothing and keeps nothing extra.

#include <catch2/catch.hpp>

#include <string>
#include <thread>
#include <vector>

#include "compute/context/context_attention.hpp"
#include "compute/context/context_cost.hpp"
#include "compute/context/context_split.hpp"
#include "compute/context/local_exchange.hpp"

using namespace troupe::compute;
using namespace troupe::compute::context;
using troupe::Status;

namespace {

// A rank's exchange that counts the bytes it sends to other ranks: a ring shift's whole block, an
// all-to-all's blocks but its own.
class CountingExchange final : public ContextExchange {
 public:
  explicit CountingExchange(ContextExchange& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int shards() const override { return inner_.shards(); }
  Status begin_shift(std::span<const std::byte> send, std::span<std::byte> recv) override {
    sent += double(send.size());
    return inner_.begin_shift(send, recv);
  }
  Status finish_shift() override { return inner_.finish_shift(); }
  Status begin_all_to_all(std::span<const std::byte> send, std::span<const std::size_t> send_bytes,
                          std::span<std::byte> recv, std::span<const std::size_t> recv_bytes) override {
    sent += double(send.size() - send_bytes[static_cast<std::size_t>(rank())]);
    return inner_.begin_all_to_all(send, send_bytes, recv, recv_bytes);
  }
  Status finish_all_to_all() override { return inner_.finish_all_to_all(); }
  double sent = 0;

 private:
  ContextExchange& inner_;
};

struct Sent {
  double forward = 0, backward = 0;
};

// Rank 0's bytes sent in one forward and one backward of B sequences of T over `shards` threads.
Sent measured_sent(ContextMethod method, int B, int T, int channels, int heads, int shards) {
  const ContextShape shape{B, channels, heads, make_context_split(T, shards).value()};
  LocalContextGroup group(shards);
  std::vector<Sent> sent(shards);
  std::vector<std::string> failures(shards);
  std::vector<std::thread> ranks;
  for (int r = 0; r < shards; ++r) {
    ranks.emplace_back([&, r] {
      CountingExchange exchange(group.rank(r));
      auto attention = make_context_attention<float>(method, shape, exchange);
      if (!attention) {
        failures[r] = attention.error().message;
        return;
      }
      const std::size_t rows = std::size_t(B) * shape.split.local_rows();
      std::vector<float> qkv(rows * 3 * channels, 0.5f), dout(rows * channels, 0.25f), out(rows * channels),
          dqkv(rows * 3 * channels);
      if (auto st = (*attention)->forward(out.data(), qkv.data()); !st) failures[r] = st.error().message;
      sent[r].forward = exchange.sent;
      if (auto st = (*attention)->backward(dqkv.data(), dout.data(), qkv.data()); !st) failures[r] = st.error().message;
      sent[r].backward = exchange.sent - sent[r].forward;
    });
  }
  for (std::thread& t : ranks) t.join();
  for (const std::string& f : failures) REQUIRE(f.empty());
  return sent[0];
}

}  // namespace

TEST_CASE("context cost: the values a rank sends per layer are what it hands its exchange", "[context]") {
  for (ContextMethod method : context_methods) {
    for (int shards : {2, 4}) {
      const int B = 2, T = 64, channels = 16, heads = 4;
      INFO(std::string(context_method_name(method)) << " C = " << shards);
      const ContextLayerCost cost = context_layer_cost(method, B, T, channels, heads, shards);
      const Sent sent = measured_sent(method, B, T, channels, heads, shards);
      CHECK(sent.forward > 0);
      CHECK(cost.forward_sent * sizeof(float) == Approx(sent.forward));
      CHECK(cost.backward_sent * sizeof(float) == Approx(sent.backward));
      CHECK(cost.kept > 0);
      CHECK(cost.held > 0);
    }
  }
}

TEST_CASE(
    "context cost: the all-to-all keeps less per layer than the ring and sends more in its backward, and one "
    "shard costs nothing",
    "[context]") {
  const ContextLayerCost ring = context_layer_cost(ContextMethod::ring, 1, 4096, 64, 4, 2);
  const ContextLayerCost all = context_layer_cost(ContextMethod::all_to_all, 1, 4096, 64, 4, 2);
  CHECK(all.kept < ring.kept);
  CHECK(all.backward_sent > all.forward_sent);
  // Halving each rank's rows halves what it keeps.
  CHECK(context_layer_cost(ContextMethod::ring, 1, 4096, 64, 4, 4).kept == Approx(ring.kept / 2));
  const ContextLayerCost none = context_layer_cost(ContextMethod::ring, 1, 4096, 64, 4, 1);
  CHECK(none.kept + none.held + none.forward_sent + none.backward_sent == 0);
}
