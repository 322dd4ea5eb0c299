// Activation recomputation: a stage that keeps less and recomputes in backward computes exactly
// what a stage that keeps everything computes (same kernels on the same inputs, in the same
// order), and holds the activation bytes recompute.hpp promises.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/model/gpt.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/model/recompute.hpp"
#include "compute/model/stage_split.hpp"
#include "compute/random.hpp"
#include "support/micro_batch.hpp"
#include "support/tensor_compare.hpp"

using namespace troupe::compute;
using troupe::test::bitwise_equal;
using troupe::test::host_copy;
using troupe::test::micro_batch;
using troupe::test::MicroBatch;

namespace {

const GPTConfig kConfig{3, 32, 4, 16, 64, 64};

// What a chain of `stages` stages computes for two micro-batches run as 1F1B runs them (both
// forwards, then both backwards, so the slots share the recompute scratch in between): the
// losses, every stage's gradients and every stage's input gradient of each micro-batch.
struct ChainResult {
  std::vector<double> losses;
  std::vector<Tensor> grads, input_grads;
};

ChainResult run_chain(Backend& backend, int stages, DType dtype, Recompute recompute) {
  const MicroBatch mbs[2] = {micro_batch(2, 16, kConfig.vocab_size, 7), micro_batch(3, 12, kConfig.vocab_size, 8)};
  auto split = split_layers(kConfig, stages);
  REQUIRE(split.ok());
  std::vector<std::unique_ptr<GPTStage>> chain;
  for (const auto& s : *split) {
    chain.push_back(std::make_unique<GPTStage>(kConfig, backend, s.first_layer, s.last_layer, dtype, recompute));
    chain.back()->init_parameters(5);
    chain.back()->reserve(3, 16, 2);
    chain.back()->zero_grad();
  }
  ChainResult result;
  for (int m = 0; m < 2; ++m) {
    Tensor x = mbs[m].tokens;
    for (auto& st : chain) {
      const double loss = st->forward(m, x, st->is_last() ? mbs[m].targets : Tensor{});
      if (st->is_last()) result.losses.push_back(loss);
      x = host_copy(backend, st->output(m));
    }
  }
  for (int m = 0; m < 2; ++m) {
    Tensor dy;
    for (int s = stages - 1; s >= 0; --s) {
      GPTStage& st = *chain[static_cast<std::size_t>(s)];
      st.backward(m, dy, 0.5);
      dy = host_copy(backend, st.input_grad(m));
      result.input_grads.push_back(dy);
    }
  }
  for (auto& st : chain) result.grads.push_back(host_copy(backend, st->grads()));
  return result;
}

void check_bitwise_equal_to_none(int stages, DType dtype, Recompute recompute) {
  CpuBackend backend(2);  // threaded kernels: recomputation must repeat them bit for bit
  const ChainResult kept = run_chain(backend, stages, dtype, Recompute::none);
  const ChainResult redone = run_chain(backend, stages, dtype, recompute);
  REQUIRE(kept.losses.size() == 2);
  REQUIRE(redone.losses.size() == 2);
  for (int m = 0; m < 2; ++m) CHECK(std::memcmp(&kept.losses[m], &redone.losses[m], sizeof(double)) == 0);
  REQUIRE(kept.grads.size() == redone.grads.size());
  for (std::size_t s = 0; s < kept.grads.size(); ++s) {
    INFO("stage " << s << " parameter gradients");
    CHECK(bitwise_equal(kept.grads[s], redone.grads[s]));
  }
  REQUIRE(kept.input_grads.size() == redone.input_grads.size());
  for (std::size_t i = 0; i < kept.input_grads.size(); ++i) {
    INFO("input gradient " << i);
    CHECK(bitwise_equal(kept.input_grads[i], redone.input_grads[i]));
  }
}

std::int64_t reserved_bytes(Recompute recompute, int slots) {
  CpuBackend backend(1);
  GPTStage stage(kConfig, backend, 1, 3, DType::f32, recompute);  // two blocks, neither end
  stage.reserve(3, 16, slots);
  return stage.activation_bytes();
}

}  // namespace

TEST_CASE("recompute: selective and full give gradients bitwise equal to keeping everything, f32 and f64") {
  for (Recompute r : {Recompute::selective, Recompute::full}) {
    INFO("recompute " << recompute_name(r));
    for (int stages : {1, 2, 3}) {
      INFO(stages << " stages");
      check_bitwise_equal_to_none(stages, DType::f32, r);
      check_bitwise_equal_to_none(stages, DType::f64, r);
    }
  }
}

// Under bf16 on the CPU a slot keeps the residual stream rounded to bf16 for the LayerNorms'
// backward, but the stream is summed in f32: every mode's forward is the same. Selective keeps
// what none keeps; full keeps each block's input as summed, so its LayerNorms' backward reads the
// f32 stream where none's reads it rounded (u = 2^-8 of each value): its gradients differ, within
// a few rounding units of the largest.
TEST_CASE(
    "recompute under bf16: the same losses in every mode, selective's gradients bit for bit none's, full's "
    "within 4u",
    "[bf16]") {
  CpuBackend backend(2, Precision::bf16);
  const ChainResult none = run_chain(backend, 2, DType::f32, Recompute::none);
  const ChainResult selective = run_chain(backend, 2, DType::f32, Recompute::selective);
  const ChainResult full = run_chain(backend, 2, DType::f32, Recompute::full);
  for (int m = 0; m < 2; ++m) {
    CHECK(std::memcmp(&none.losses[m], &selective.losses[m], sizeof(double)) == 0);
    CHECK(std::memcmp(&none.losses[m], &full.losses[m], sizeof(double)) == 0);
  }
  REQUIRE(none.grads.size() == full.grads.size());
  for (std::size_t s = 0; s < none.grads.size(); ++s) {
    INFO("stage " << s << " parameter gradients");
    CHECK(bitwise_equal(none.grads[s], selective.grads[s]));
    const float* kept = none.grads[s].data_as<float>();
    const float* summed = full.grads[s].data_as<float>();
    double largest = 0, worst = 0;
    for (std::int64_t i = 0; i < none.grads[s].numel(); ++i) {
      largest = std::max(largest, std::abs(double(kept[i])));
      worst = std::max(worst, std::abs(double(kept[i]) - double(summed[i])));
    }
    INFO("largest gradient " << largest << ", worst difference " << worst);
    CHECK(worst > 0);  // the kept stream is rounded: were it not, this would show nothing
    CHECK(worst <= std::ldexp(4.0, -8) * largest);
  }
}

TEST_CASE("recompute: activation bytes drop by what each mode does not keep") {
  // att: the attention state, one log-sum-exp per (sequence, head, query row).
  const std::int64_t BT = 3 * 16, C = kConfig.n_embd, att = 3 * kConfig.n_head * 16, f32 = 4;
  const std::int64_t block = BT * (16 * C + 4) + att;  // one block's kept buffers, recompute none
  const std::int64_t layers = 2, slots = 3, kept_blocks = layers * slots;
  const std::int64_t none = reserved_bytes(Recompute::none, slots);
  // Selective: att and the GELU output are one set shared by every (slot, layer).
  CHECK(none - reserved_bytes(Recompute::selective, slots) == (kept_blocks - 1) * (att + BT * 4 * C) * f32);
  // Full: each (slot, layer) keeps its output (the next block's input); one block up to its GELU
  // output (all but that output) is scratch.
  CHECK(none - reserved_bytes(Recompute::full, slots) == (kept_blocks * block - kept_blocks * BT * C - (block - BT * C)) * f32);
}

TEST_CASE("recompute: every mode is listed once, by the name train.recompute takes") {
  std::vector<std::string> names;
  for (Recompute r : recompute_modes) names.push_back(recompute_name(r));
  CHECK(names == std::vector<std::string>{"none", "selective", "full"});
}
