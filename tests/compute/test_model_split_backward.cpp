// A stage's backward split in two (B: backward_input, W: backward_weights) against backward():
// the same input gradients and parameter gradients, bit for bit, when the gradients start from
// zero for each micro-batch (as the pipeline's micro-batch sum makes them), with other micro-
// batches' forwards and B's run between a slot's B and its W, under every recompute policy.

#include <catch2/catch.hpp>

#include <memory>
#include <vector>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/model/stage_split.hpp"
#include "compute/random.hpp"
#include "support/micro_batch.hpp"
#include "support/tensor_compare.hpp"

using namespace troupe::compute;
using namespace troupe::test;

namespace {

using Chain = std::vector<std::unique_ptr<GPTStage>>;

Chain chain(const GPTConfig& cfg, CpuBackend& backend, int p, Recompute recompute, bool split) {
  Chain stages;
  auto layers = split_layers(cfg, p);
  REQUIRE(layers.ok());
  for (const auto& s : *layers) {
    stages.push_back(std::make_unique<GPTStage>(cfg, backend, s.first_layer, s.last_layer, DType::f32, recompute));
    stages.back()->init_parameters(7);
    stages.back()->reserve(3, 16, 2, split);
  }
  return stages;
}

void forward_all(CpuBackend& backend, Chain& stages, const MicroBatch mbs[2]) {
  for (int m = 0; m < 2; ++m) {
    Tensor x = mbs[m].tokens;
    for (auto& st : stages) {
      st->forward(m, x, st->is_last() ? mbs[m].targets : Tensor{});
      x = host_copy(backend, st->output(m));
    }
  }
}

void check_split_equals_whole(int p, Recompute recompute) {
  const GPTConfig cfg{6, 32, 4, 16, 64, 64};
  CpuBackend backend(1);
  const MicroBatch mbs[2] = {micro_batch(2, 16, cfg.vocab_size, 100), micro_batch(3, 12, cfg.vocab_size, 200)};
  Chain whole = chain(cfg, backend, p, recompute, false), split = chain(cfg, backend, p, recompute, true);
  forward_all(backend, whole, mbs);
  forward_all(backend, split, mbs);
  for (auto& st : split) CHECK(st->weight_input_bytes() > 0);

  // backward(): micro-batch 0 then 1 through every stage, each stage's gradients kept per micro-batch.
  std::vector<Tensor> whole_grads[2], whole_dinput[2];
  for (int m = 0; m < 2; ++m) {
    Tensor dy;
    for (int s = p - 1; s >= 0; --s) {
      GPTStage& st = *whole[static_cast<std::size_t>(s)];
      st.zero_grad();
      st.backward(m, dy, 0.5);
      dy = host_copy(backend, st.input_grad(m));
      whole_grads[m].insert(whole_grads[m].begin(), host_copy(backend, st.grads()));
      whole_dinput[m].insert(whole_dinput[m].begin(), dy);
    }
  }
  // Split: both micro-batches' B first (each stage's input gradient checked as it is made), then
  // the W's, so micro-batch 1's B has overwritten every buffer the stages share before W 0 runs.
  for (int m = 0; m < 2; ++m) {
    Tensor dy;
    for (int s = p - 1; s >= 0; --s) {
      GPTStage& st = *split[static_cast<std::size_t>(s)];
      st.backward_input(m, dy, 0.5);
      dy = host_copy(backend, st.input_grad(m));
      INFO("micro-batch " << m << " stage " << s << " input gradient");
      CHECK(bitwise_equal(dy, whole_dinput[m][static_cast<std::size_t>(s)]));
    }
  }
  for (int m = 0; m < 2; ++m) {
    for (int s = 0; s < p; ++s) {
      GPTStage& st = *split[static_cast<std::size_t>(s)];
      st.zero_grad();
      std::vector<int> layers_done;
      st.backward_weights(m, [&](int layer) { layers_done.push_back(layer); });
      CHECK(static_cast<int>(layers_done.size()) == st.last_layer() - st.first_layer());
      INFO("micro-batch " << m << " stage " << s << " parameter gradients");
      CHECK(bitwise_equal(host_copy(backend, st.grads()), whole_grads[m][static_cast<std::size_t>(s)]));
    }
  }
}

}  // namespace

TEST_CASE("split backward: B then W gives backward's gradients bit for bit, one stage and two", "[model][pipeline]") {
  for (int p : {1, 2}) {
    INFO("p=" << p);
    check_split_equals_whole(p, Recompute::none);
  }
}

TEST_CASE("split backward: B then W bit for bit under selective and full recompute", "[model][pipeline]") {
  check_split_equals_whole(2, Recompute::selective);
  check_split_equals_whole(2, Recompute::full);
}

TEST_CASE(
    "split backward: W before its B, or a second B before W, is refused; a B whose step was abandoned is "
    "forgotten",
    "[model][pipeline]") {
  const GPTConfig cfg{2, 32, 4, 16, 64, 64};
  CpuBackend backend(1);
  const MicroBatch mb = micro_batch(2, 16, cfg.vocab_size, 100);
  GPTStage st(cfg, backend, 0, 2);
  st.init_parameters(7);
  st.reserve(2, 16, 1, true);
  st.forward(0, mb.tokens, mb.targets);
  CHECK_THROWS(st.backward_weights(0));
  st.backward_input(0, Tensor{});
  CHECK_THROWS(st.backward(0, Tensor{}));
  st.backward_weights(0);
  CHECK_THROWS(st.backward_weights(0));
  // A recovery abandons the step between a B and its W, then takes it again from its first forward.
  st.forward(0, mb.tokens, mb.targets);
  st.backward_input(0, Tensor{});
  st.forward(0, mb.tokens, mb.targets);
  CHECK_THROWS(st.backward_input(0, Tensor{}));
  st.abandon_weights();
  CHECK_THROWS(st.backward_weights(0));
  st.backward_input(0, Tensor{});
  st.backward_weights(0);
}

TEST_CASE("split backward: what B keeps for W is counted on top of the activations, per layer as documented",
          "[model][pipeline][memory]") {
  const GPTConfig cfg{6, 32, 4, 16, 64, 64};
  CpuBackend backend(1);
  GPTStage whole(cfg, backend, 0, 3), split(cfg, backend, 0, 3);
  whole.reserve(3, 16, 2);
  split.reserve(3, 16, 2, true);
  CHECK(whole.weight_input_bytes() == 0);
  // Per layer and slot: B·T·(4C + M + 3A) + M floats (docs/schedules.md), here M = 4C and A = C.
  const std::int64_t BT = 3 * 16, C = 32, per_layer = BT * (4 * C + 4 * C + 3 * C) + 4 * C;
  CHECK(split.weight_input_bytes() == 2 * 3 * per_layer * static_cast<std::int64_t>(sizeof(float)));
  CHECK(split.activation_bytes() - split.weight_input_bytes() == whole.activation_bytes());
}
