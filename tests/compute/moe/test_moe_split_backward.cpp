// A stage with mixture-of-experts blocks, its backward split in two (B: backward_input, W:
// backward_weights, as zero-bubble pipelines run it) against backward(), in float64 with the
// routing losses on: the same input gradients and parameter gradients, bit for bit, with and
// without a shared expert, dense blocks between MoE ones, under every recompute policy, on one
// rank and on each rank of an expert group of 2 threads; both micro-batches' B run before either
// W, and no W exchanges anything with the group (compute/moe/moe_layer.hpp, moe_backward_input).
// What B keeps for W is counted as documented (docs/schedules.md), and by the memory estimate.

#include <catch2/catch.hpp>

#include <atomic>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "compute/context/local_exchange.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/model/memory_estimate.hpp"
#include "compute/random.hpp"
#include "support/micro_batch.hpp"
#include "support/moe_config.hpp"
#include "support/tensor_compare.hpp"

using namespace troupe::compute;
using troupe::Status;
using troupe::test::bitwise_equal;
using troupe::test::host_copy;

using troupe::test::micro_batch;
using troupe::test::MicroBatch;
using troupe::test::three_block_moe;

namespace {

// An exchange that counts the calls it passes on to a rank of the group.
class CountingExchange : public context::ContextExchange {
 public:
  explicit CountingExchange(context::ContextExchange& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int shards() const override { return inner_.shards(); }
  Status begin_shift(std::span<const std::byte> send, std::span<std::byte> recv) override {
    ++calls;
    return inner_.begin_shift(send, recv);
  }
  Status finish_shift() override {
    ++calls;
    return inner_.finish_shift();
  }
  Status begin_all_to_all(std::span<const std::byte> send, std::span<const std::size_t> send_bytes,
                          std::span<std::byte> recv, std::span<const std::size_t> recv_bytes) override {
    ++calls;
    return inner_.begin_all_to_all(send, send_bytes, recv, recv_bytes);
  }
  Status finish_all_to_all() override {
    ++calls;
    return inner_.finish_all_to_all();
  }
  int calls = 0;

 private:
  context::ContextExchange& inner_;
};

struct Gradients {
  std::vector<Tensor> input, params;  // per micro-batch, each from zero gradients
};

// Both micro-batches' forwards, then whole backwards, or B for both and then W for both.
Gradients run_stage(GPTStage& stage, const MicroBatch mbs[2], bool split, const CountingExchange* exchange) {
  Backend& backend = stage.backend();
  for (int m = 0; m < 2; ++m) stage.forward(m, mbs[m].tokens, mbs[m].targets);
  Gradients g;
  for (int m = 0; m < 2; ++m) {
    if (split) {
      stage.backward_input(m, Tensor{}, 0.5);
    } else {
      stage.zero_grad();
      stage.backward(m, Tensor{}, 0.5);
      g.params.push_back(host_copy(backend, stage.grads()));
    }
    g.input.push_back(host_copy(backend, stage.input_grad(m)));
  }
  if (!split) return g;
  const int calls_before_weights = exchange != nullptr ? exchange->calls : 0;
  for (int m = 0; m < 2; ++m) {
    stage.zero_grad();
    std::vector<int> layers_done;
    stage.backward_weights(m, [&](int layer) { layers_done.push_back(layer); });
    CHECK(static_cast<int>(layers_done.size()) == stage.config().n_layer);
    g.params.push_back(host_copy(backend, stage.grads()));
  }
  if (exchange != nullptr) CHECK(exchange->calls == calls_before_weights);
  return g;
}

struct WholeAndSplit {
  Gradients whole, split;
  std::int64_t weight_input_bytes = 0;
};

WholeAndSplit run_rank(const GPTConfig& cfg, Recompute recompute, context::ContextExchange* group, std::uint64_t seed) {
  CpuBackend backend(2);  // threaded kernels: B then W must repeat backward's bit for bit
  std::unique_ptr<CountingExchange> counted;
  if (group != nullptr) counted = std::make_unique<CountingExchange>(*group);
  const ExpertGroup experts{counted.get()};
  const MicroBatch mbs[2] = {micro_batch(2, 16, cfg.vocab_size, seed), micro_batch(3, 12, cfg.vocab_size, seed + 10)};
  WholeAndSplit result;
  for (bool split : {false, true}) {
    GPTStage stage(cfg, backend, 0, cfg.n_layer, DType::f64, recompute, nullptr, {}, {}, experts);
    stage.set_moe_loss_coefficients(0.1, 0.01);
    stage.init_parameters(5);
    stage.reserve(3, 16, 2, split);
    (split ? result.split : result.whole) = run_stage(stage, mbs, split, counted.get());
    if (split) result.weight_input_bytes = stage.weight_input_bytes();
  }
  return result;
}

// Every rank of an expert group of `shards` threads (one rank alone for 1), each with its own tokens.
std::vector<WholeAndSplit> run_group(const GPTConfig& cfg, Recompute recompute, int shards) {
  std::vector<WholeAndSplit> results(static_cast<std::size_t>(shards));
  if (shards == 1) {
    results[0] = run_rank(cfg, recompute, nullptr, 7);
    return results;
  }
  context::LocalContextGroup group(shards);
  std::vector<std::exception_ptr> failed(static_cast<std::size_t>(shards));
  std::vector<std::thread> threads;
  for (int r = 0; r < shards; ++r)
    threads.emplace_back([&, r] {
      try {
        results[static_cast<std::size_t>(r)] = run_rank(cfg, recompute, &group.rank(r), 7 + 100 * r);
      } catch (...) {
        failed[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& f : failed)
    if (f) std::rethrow_exception(f);
  return results;
}

void check_split_equals_whole(const GPTConfig& cfg, Recompute recompute, int shards) {
  const std::vector<WholeAndSplit> results = run_group(cfg, recompute, shards);
  for (std::size_t r = 0; r < results.size(); ++r) {
    INFO("rank " << r << " of " << shards);
    const WholeAndSplit& got = results[r];
    CHECK(got.weight_input_bytes > 0);
    for (std::size_t m = 0; m < 2; ++m) {
      INFO("micro-batch " << m);
      CHECK(bitwise_equal(got.split.input[m], got.whole.input[m]));
      CHECK(bitwise_equal(got.split.params[m], got.whole.params[m]));
    }
  }
}

}  // namespace

TEST_CASE("MoE split backward: B then W gives backward's gradients bit for bit, with and without a shared expert",
          "[moe][pipeline]") {
  for (bool shared_expert : {false, true})
    for (int moe_every : {1, 2}) {
      INFO("shared expert " << shared_expert << ", an MoE block every " << moe_every);
      check_split_equals_whole(three_block_moe(moe_every, shared_expert ? 1 : 0), Recompute::none, 1);
    }
}

TEST_CASE("MoE split backward: B then W bit for bit under selective and full recompute", "[moe][pipeline]") {
  for (Recompute recompute : {Recompute::selective, Recompute::full}) {
    INFO("recompute " << static_cast<int>(recompute));
    check_split_equals_whole(three_block_moe(2, 1), recompute, 1);
  }
}

TEST_CASE(
    "MoE split backward: on each rank of 2 expert shards B then W gives backward's gradients bit for bit, and W "
    "exchanges nothing",
    "[moe][pipeline]") {
  for (Recompute recompute : {Recompute::none, Recompute::selective, Recompute::full}) {
    INFO("recompute " << static_cast<int>(recompute));
    check_split_equals_whole(three_block_moe(1, 1), recompute, 2);
  }
  check_split_equals_whole(three_block_moe(2, 0), Recompute::none, 2);
}

TEST_CASE("MoE split backward: what B keeps for W is counted per block as documented, and by the memory estimate",
          "[moe][pipeline][memory]") {
  const GPTConfig cfg = three_block_moe(2, 1);  // block 1 MoE, 0 and 2 dense
  const std::int64_t B = 3, T = 16, BT = B * T, C = cfg.n_embd, M = 4 * C, slots = 2, f32 = 4;
  const MoEShape shape{cfg.experts, cfg.top_k, true, C, M, 1};
  for (Recompute recompute : {Recompute::none, Recompute::full}) {
    INFO("recompute " << static_cast<int>(recompute));
    CpuBackend backend(1);
    GPTStage whole(cfg, backend, 0, cfg.n_layer, DType::f32, recompute),
        split(cfg, backend, 0, cfg.n_layer, DType::f32, recompute);
    whole.reserve(B, T, slots);
    split.reserve(B, T, slots, true);
    // Per slot: a dense block's B·T·(4C + M + 3A) + M, an MoE block's B·T·6C and its MLP's own (a
    // full recompute's W also finds the rows the experts ran there), d(ln_f) B·T·C.
    const std::int64_t dense = BT * (4 * C + M + 3 * C) + M,
                       moe = BT * 6 * C + moe_weight_input_elements(shape, BT, recompute == Recompute::full);
    const std::int64_t moe_blocks = cfg.moe_layers(), dense_blocks = cfg.n_layer - moe_blocks;
    CHECK(split.weight_input_bytes() == slots * (dense_blocks * dense + moe_blocks * moe + BT * C) * f32);
    CHECK(split.activation_bytes() - split.weight_input_bytes() == whole.activation_bytes());
    StageFootprint s{0, cfg.n_layer, static_cast<int>(B), static_cast<int>(T), static_cast<int>(slots), 4};
    s.recompute = recompute;
    const double without = estimate_training_memory(cfg, s).activation_bytes;
    s.keep_for_weights = true;
    CHECK(estimate_training_memory(cfg, s).activation_bytes - without == double(split.weight_input_bytes()));
  }
}
