// Activation recomputation with mixture-of-experts blocks (compute/moe/moe_layer.hpp, "Recomputation"):
// a stage with experts that keeps less and recomputes in backward computes exactly what one that
// keeps everything computes, on one rank and on each rank of an expert group of 2 threads (whose
// full recompute exchanges the rows again, not the counts); each micro-batch keeps its own
// routing while the recompute buffers are shared; the activation bytes drop by what each mode
// does not keep, and the memory estimate drops by as much.

#include <catch2/catch.hpp>

#include <cstring>
#include <exception>
#include <memory>
#include <thread>
#include <vector>

#include "compute/context/local_exchange.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/model/memory_estimate.hpp"
#include "compute/model/recompute.hpp"
#include "compute/random.hpp"
#include "support/micro_batch.hpp"
#include "support/moe_config.hpp"
#include "support/tensor_compare.hpp"

using namespace troupe::compute;
using troupe::test::bitwise_equal;
using troupe::test::host_copy;

using troupe::test::micro_batch;
using troupe::test::MicroBatch;
using troupe::test::three_block_moe;

namespace {

// One rank's two micro-batches run as a pipeline's last stage runs them: both forwards, then both
// backwards, so the second forward overwrites every buffer the two share before the first backward.
struct RankResult {
  std::vector<double> losses;
  std::vector<GPTStage::MoERouting> routing;
  std::vector<Tensor> input_grads;
  Tensor grads;
};

RankResult run_rank(const GPTConfig& cfg, DType dtype, Recompute recompute, ExpertGroup experts, std::uint64_t seed) {
  CpuBackend backend(2);  // threaded kernels: recomputation must repeat them bit for bit
  GPTStage stage(cfg, backend, 0, cfg.n_layer, dtype, recompute, nullptr, {}, {}, experts);
  stage.set_moe_loss_coefficients(0.1, 0.01);
  stage.init_parameters(5);
  stage.reserve(3, 16, 2);
  stage.zero_grad();
  const MicroBatch mbs[2] = {micro_batch(2, 16, cfg.vocab_size, seed), micro_batch(3, 12, cfg.vocab_size, seed + 10)};
  RankResult result;
  for (int m = 0; m < 2; ++m) {
    result.losses.push_back(stage.forward(m, mbs[m].tokens, mbs[m].targets));
    result.routing.push_back(stage.moe_routing(m));
  }
  for (int m = 0; m < 2; ++m) {
    REQUIRE(stage.moe_routing(m).slots == result.routing[static_cast<std::size_t>(m)].slots);
    stage.backward(m, Tensor{}, 0.5);
    result.input_grads.push_back(host_copy(backend, stage.input_grad(m)));
  }
  result.grads = host_copy(backend, stage.grads());
  return result;
}

// Every rank of an expert group of `shards` threads (one rank alone for 1), each with its own tokens.
std::vector<RankResult> run_group(const GPTConfig& cfg, DType dtype, Recompute recompute, int shards) {
  std::vector<RankResult> results(static_cast<std::size_t>(shards));
  if (shards == 1) {
    results[0] = run_rank(cfg, dtype, recompute, {}, 7);
    return results;
  }
  context::LocalContextGroup group(shards);
  std::vector<std::exception_ptr> failed(static_cast<std::size_t>(shards));
  std::vector<std::thread> threads;
  for (int r = 0; r < shards; ++r)
    threads.emplace_back([&, r] {
      try {
        results[static_cast<std::size_t>(r)] =
            run_rank(cfg, dtype, recompute, ExpertGroup{&group.rank(r)}, 7 + 100 * r);
      } catch (...) {
        failed[static_cast<std::size_t>(r)] = std::current_exception();
      }
    });
  for (std::thread& t : threads) t.join();
  for (const std::exception_ptr& f : failed)
    if (f) std::rethrow_exception(f);
  return results;
}

void check_bitwise_equal_to_none(const GPTConfig& cfg, DType dtype, Recompute recompute, int shards) {
  const std::vector<RankResult> kept = run_group(cfg, dtype, Recompute::none, shards);
  const std::vector<RankResult> redone = run_group(cfg, dtype, recompute, shards);
  for (std::size_t r = 0; r < kept.size(); ++r) {
    INFO("rank " << r << " of " << shards);
    const RankResult &k = kept[r], &d = redone[r];
    for (std::size_t m = 0; m < 2; ++m) {
      INFO("micro-batch " << m);
      CHECK(std::memcmp(&k.losses[m], &d.losses[m], sizeof(double)) == 0);
      CHECK(k.routing[m].slots == d.routing[m].slots);
      CHECK(std::memcmp(&k.routing[m].aux, &d.routing[m].aux, sizeof(double)) == 0);
      CHECK(bitwise_equal(k.input_grads[m], d.input_grads[m]));
    }
    CHECK(bitwise_equal(k.grads, d.grads));
  }
}

std::int64_t reserved_bytes(const GPTConfig& cfg, Recompute recompute, int slots) {
  CpuBackend backend(1);
  GPTStage stage(cfg, backend, 0, cfg.n_layer, DType::f32, recompute);
  stage.reserve(3, 16, slots);
  return stage.activation_bytes();
}

}  // namespace

TEST_CASE(
    "moe recompute: selective and full give losses, routing and gradients bitwise equal to keeping everything, on "
    "one rank and on each of 2 expert shards, f32 and f64",
    "[moe][recompute]") {
  for (const int moe_every : {1, 2})
    for (const Recompute r : {Recompute::selective, Recompute::full})
      for (const int shards : {1, 2}) {
        INFO("moe_every " << moe_every << ", recompute " << recompute_name(r) << ", expert shards " << shards);
        check_bitwise_equal_to_none(three_block_moe(moe_every, 1), DType::f32, r, shards);
        check_bitwise_equal_to_none(three_block_moe(moe_every, 1), DType::f64, r, shards);
      }
}

TEST_CASE(
    "moe recompute: activation bytes drop by what each mode does not keep of an MoE block, and the memory "
    "estimate drops by as much",
    "[moe][recompute]") {
  const GPTConfig cfg = three_block_moe(1, 1);  // every block an MoE block
  const std::int64_t B = 3, T = 16, BT = B * T, C = cfg.n_embd, att = B * cfg.n_head * T, f32 = 4;
  const MoEShape shape{cfg.experts, cfg.top_k, true, C, 4 * C, 1};
  // One MoE block's kept buffers under none: a dense block's but fch and fch_gelu, and the MLP's state.
  const std::int64_t block = BT * (8 * C + 4) + att + moe_activation_elements(shape, BT);
  const std::int64_t slots = 2, kept_blocks = cfg.n_layer * slots;
  const std::int64_t none = reserved_bytes(cfg, Recompute::none, slots),
                     selective = reserved_bytes(cfg, Recompute::selective, slots),
                     full = reserved_bytes(cfg, Recompute::full, slots);
  // Selective: the attention state and the experts' GELU outputs are one set every (slot, block) shares.
  CHECK(none - selective == (kept_blocks - 1) * (att + moe_gelu_elements(shape, BT)) * f32);
  // Full: each (slot, block) keeps its output; one block's buffers but that output are scratch.
  CHECK(none - full == (kept_blocks - 1) * (block - BT * C) * f32);

  auto estimate = [&](Recompute recompute) {
    StageFootprint s{0, cfg.n_layer, static_cast<int>(B), static_cast<int>(T), static_cast<int>(slots), 4};
    s.recompute = recompute;
    return estimate_training_memory(cfg, s).activation_bytes;
  };
  CHECK(estimate(Recompute::none) - estimate(Recompute::selective) == double(none - selective));
  CHECK(estimate(Recompute::none) - estimate(Recompute::full) == double(none - full));
  // With dense blocks between the MoE blocks as well.
  const GPTConfig mixed = three_block_moe(2, 1);
  for (const Recompute r : {Recompute::selective, Recompute::full}) {
    INFO("moe_every 2, recompute " << recompute_name(r));
    StageFootprint s{0, mixed.n_layer, static_cast<int>(B), static_cast<int>(T), static_cast<int>(slots), 4};
    const double kept_all = estimate_training_memory(mixed, s).activation_bytes;
    s.recompute = r;
    CHECK(kept_all - estimate_training_memory(mixed, s).activation_bytes ==
          double(reserved_bytes(mixed, Recompute::none, slots) - reserved_bytes(mixed, r, slots)));
  }
}
