// A GPT whose blocks hold the mixture-of-experts MLP (GPTConfig::experts): the whole model's
// gradient, routing losses included, against finite differences in float64; the parameter
// layout's MoE tensors and its active count; the memory estimate; two pipeline stages' routing and
// gradients, routing losses included, against the whole model's.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>

#include "compute/context/local_exchange.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/model/gpt.hpp"
#include "compute/model/memory_estimate.hpp"
#include "compute/model/stage_split.hpp"
#include "compute/optim/adamw.hpp"
#include "compute/random.hpp"
#include "support/finite_difference.hpp"
#include "support/heap_bytes.hpp"

using namespace troupe::compute;
using troupe::test::central_difference;
using troupe::test::GradientTolerance;
using troupe::test::rounding_unit;

namespace {

// 3 blocks, 4 experts top-2 in every other one (block 1), a shared expert; experts of a dense
// MLP's width 4C (expert_width 0) or another.
GPTConfig narrow_moe_config(int moe_every = 2, int shared = 1, int expert_width = 0) {
  GPTConfig cfg{3, 8, 2, 6, 11, 11};
  cfg.experts = 4;
  cfg.top_k = 2;
  cfg.moe_every = moe_every;
  cfg.shared_experts = shared;
  cfg.expert_width = expert_width;
  return cfg;
}

}  // namespace

TEST_CASE(
    "moe GPT: gradient with the routing losses equals central finite differences in float64, with experts "
    "as wide as the dense MLP and narrower",
    "[model][gradcheck]") {
  const int expert_width = GENERATE(0, 12);
  INFO("model.expert_width " << expert_width);
  const GPTConfig cfg = narrow_moe_config(1, 1, expert_width);
  const double aux_coef = 0.5, z_coef = 0.2;
  CpuBackend backend(1);
  GPT model(cfg, backend, DType::f64);
  model.stage().set_moe_loss_coefficients(aux_coef, z_coef);
  model.init_parameters(7);
  double* p = model.params().data_as<double>();
  for (std::int64_t i = 0; i < model.layout().total(); ++i) p[i] += 0.3 * counter_normal(11, 0, i);

  // B·T = 8: the backend's single-precision dloss, float(1/8), is exact, so the cross-entropy's
  // share carries no error that the routing losses' share could unmask by cancelling it.
  const int B = 2, T = 4;
  model.reserve(B, T);
  Tensor tokens = Tensor::zeros({B, T}, DType::i32), targets = Tensor::zeros({B, T}, DType::i32);
  for (int i = 0; i < B * T; ++i) {
    tokens.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(splitmix64(i) % 11);
    targets.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(splitmix64(100 + i) % 11);
  }
  // The loss backward differentiates: the cross-entropy plus each MoE block's weighted losses.
  auto total_loss = [&] {
    const double ce = model.forward(tokens, targets);
    const GPTStage::MoERouting m = model.stage().moe_routing(0);
    return ce + cfg.moe_layers() * (aux_coef * m.aux + z_coef * m.z);
  };
  model.zero_grad();
  const double loss = total_loss();
  const GPTStage::MoERouting routing = model.stage().moe_routing(0);
  REQUIRE(routing.aux > 0);
  // Each block sends every token's k slots somewhere.
  REQUIRE(routing.slots.size() == static_cast<std::size_t>(cfg.moe_layers() * cfg.experts));
  for (int b = 0; b < cfg.moe_layers(); ++b) {
    std::int64_t sent = 0;
    for (int e = 0; e < cfg.experts; ++e) sent += routing.slots[static_cast<std::size_t>(b * cfg.experts + e)];
    CHECK(sent == std::int64_t{B} * T * cfg.top_k);
  }
  CHECK((routing.load_imbalance() >= 1.0 && routing.load_imbalance() <= cfg.experts));
  model.backward();
  const double* g = model.grads().data_as<double>();
  // As test_model_gradient.cpp: h and 16 rounding units of the loss; rtol 1e-9 as the layer checks.
  const double h = 1e-4;
  const GradientTolerance tolerance{16 * rounding_unit(loss, h), 1e-9};
  for (const auto& view : model.layout().views()) {
    double worst = 0, largest = 0;
    for (std::int64_t i = view.offset; i < view.offset + view.numel(); ++i) {
      const double numeric = central_difference(p[i], h, total_loss);
      worst = std::max(worst, tolerance.used(numeric, g[i]));
      largest = std::max(largest, std::abs(numeric));
    }
    INFO("parameter " << view.name << ": worst share of the tolerance " << worst);
    CHECK(worst <= 1.0);
    CHECK(largest * 1e-3 > tolerance.atol + tolerance.rtol * largest);
  }
}

TEST_CASE(
    "moe GPT: the layout holds the router and stacked experts in every moe_every-th block, and counts "
    "active parameters") {
  const GPTConfig cfg = narrow_moe_config(2, 1);
  const ParameterLayout layout(cfg);
  const std::int64_t C = cfg.n_embd, E = cfg.experts;
  CHECK(layout.find("h.0.mlp.c_fc.weight").shape == Shape{4 * C, C});
  CHECK(layout.find("h.1.mlp.router.weight").shape == Shape{E, C});
  CHECK(layout.find("h.1.mlp.experts.c_fc.weight").shape == Shape{E, 4 * C, C});
  CHECK(layout.find("h.1.mlp.experts.c_proj.weight").shape == Shape{E, C, 4 * C});
  CHECK(layout.find("h.1.mlp.shared_expert.c_proj.bias").shape == Shape{C});
  CHECK(layout.find("h.2.mlp.c_proj.bias").shape == Shape{C});
  CHECK_THROWS(layout.find("h.1.mlp.c_fc.weight"));
  // Layer ranges tile the blocks, the MoE block's the larger by (E - 1 + 1 shared) experts and the router.
  const auto [b0, e0] = layout.layer_range(0);
  const auto [b1, e1] = layout.layer_range(1);
  CHECK(e0 == b1);
  const std::int64_t expert = 8 * C * C + 5 * C;
  CHECK((e1 - b1) - (e0 - b0) == E * expert + E * C);
  CHECK(layout.total() - layout.active() == (E - cfg.top_k) * expert);
  GPTConfig dense = cfg;
  dense.experts = 0;
  CHECK(ParameterLayout(dense).active() == ParameterLayout(dense).total());

  // Narrower experts: the experts and the shared expert are H wide; the dense blocks keep 4C.
  const GPTConfig fine = narrow_moe_config(2, 1, 12);
  const ParameterLayout narrow(fine);
  const std::int64_t H = 12, narrow_expert = 2 * C * H + H + C;
  CHECK(fine.expert_hidden() == H);
  CHECK(narrow.find("h.1.mlp.experts.c_fc.weight").shape == Shape{E, H, C});
  CHECK(narrow.find("h.1.mlp.experts.c_fc.bias").shape == Shape{E, H});
  CHECK(narrow.find("h.1.mlp.experts.c_proj.weight").shape == Shape{E, C, H});
  CHECK(narrow.find("h.1.mlp.shared_expert.c_fc.weight").shape == Shape{H, C});
  CHECK(narrow.find("h.0.mlp.c_fc.weight").shape == Shape{4 * C, C});
  CHECK(narrow.total() - narrow.active() == (E - fine.top_k) * narrow_expert);
  const auto [n0, m0] = narrow.layer_range(0);
  const auto [n1, m1] = narrow.layer_range(1);
  CHECK((m1 - n1) - (m0 - n0) == (E + 1) * narrow_expert + E * C - expert);
  CHECK(fine.moe_block_extra_parameters() == double((m1 - n1) - (m0 - n0)));
}

TEST_CASE("moe GPT: validate names the MoE key that is out of range") {
  GPTConfig cfg = narrow_moe_config();
  cfg.top_k = 5;
  CHECK(validate(cfg).error().message == "model.top_k 5 must be between 1 and model.experts 4");
  cfg = narrow_moe_config();
  cfg.moe_every = 4;
  CHECK(validate(cfg).error().message == "model.moe_every 4 must be between 1 and model.n_layer 3");
  cfg = narrow_moe_config();
  cfg.shared_experts = 2;
  CHECK(validate(cfg).error().message == "model.shared_experts must be 0 or 1, got 2");
  cfg = narrow_moe_config();
  cfg.expert_width = -3;
  CHECK(validate(cfg).error().message == "model.expert_width must not be negative (0 = 4 x model.n_embd), got -3");
  CHECK(validate(narrow_moe_config()).ok());
}

// As test_model_memory_estimate.cpp holds the dense model: what the stage and its AdamW allocate,
// counted by the allocator, against the estimate.
TEST_CASE("moe GPT: the memory estimate is within 3 percent of what the model and its AdamW allocate", "[model]") {
  GPTConfig cfg{4, 64, 4, 64, 256, 256};
  cfg.experts = 4;
  cfg.top_k = 2;
  for (const int every : {1, 2})
    for (const int shared : {0, 1}) {
      cfg.moe_every = every;
      cfg.shared_experts = shared;
      // Narrower experts (a quarter of the dense MLP's width) in one of the four.
      cfg.expert_width = every == 1 && shared == 1 ? 64 : 0;
      const StageFootprint s{0, 4, 4, 64, 1, 4};
      CpuBackend backend(1);
      const double before = troupe::test::heap_bytes_in_use();
      {
        auto stage = std::make_unique<GPTStage>(cfg, backend, 0, 4, DType::f32);
        stage->reserve(s.B, s.T, s.slots);
        AdamW optimizer(backend, stage->views(), stage->num_params(), DType::f32, AdamWOptions{}, 0,
                        stage->num_params());
        const double allocated = troupe::test::heap_bytes_in_use() - before;
        const MemoryEstimate estimate = estimate_training_memory(cfg, s);
        INFO("moe_every " << every << ", shared " << shared << ", expert_width " << cfg.expert_width << ": estimate "
                          << estimate.total() << ", allocated " << allocated);
        CHECK(estimate.parameter_bytes == 16.0 * double(ParameterLayout(cfg).total()));
        CHECK(estimate.parameter_bytes == 16.0 * double(stage_parameter_count(cfg, 0, 4)));
        CHECK(estimate.total() == Approx(allocated).epsilon(0.03));
      }
    }
}

TEST_CASE("moe GPT: an expert shard's layout holds its E/EP experts, each view saying where it sits in the whole model",
          "[model][moe]") {
  const GPTConfig cfg = narrow_moe_config(2, 1);
  const ParameterLayout whole(cfg);
  const std::int64_t C = cfg.n_embd, E = cfg.experts, expert = 8 * C * C + 5 * C;
  for (const int ep : {2, 4})
    for (int r = 0; r < ep; ++r) {
      INFO("expert shard " << r << " of " << ep);
      const ParameterLayout local(cfg, {r, ep});
      CHECK(local.total() == whole.total() - cfg.moe_layers() * (E - E / ep) * expert);
      CHECK(local.active() == whole.active());
      REQUIRE(local.views().size() == whole.views().size());
      std::int64_t next = 0;
      for (std::size_t i = 0; i < local.views().size(); ++i) {
        const ParameterView &mine = local.views()[i], &all = whole.views()[i];
        CHECK(mine.name == all.name);
        CHECK(mine.offset == next);
        next += mine.numel();
        CHECK(mine.expert == (mine.name.find(".mlp.experts.") != std::string::npos));
        if (!mine.expert) {
          CHECK(mine.shape == all.shape);
          CHECK(mine.global_offset == all.offset);
          continue;
        }
        Shape shape = all.shape;
        shape[0] = E / ep;
        CHECK(mine.shape == shape);
        CHECK(mine.global_offset == all.offset + r * mine.numel());
      }
      CHECK(next == local.total());
    }
}

TEST_CASE(
    "moe GPT: under expert shards the memory estimate holds the rank's experts alone, the larger expert rows "
    "and exchange buffers",
    "[model][moe]") {
  GPTConfig cfg{4, 64, 4, 64, 256, 256};
  cfg.experts = 4;
  cfg.top_k = 2;
  cfg.moe_every = 2;
  for (const int ep : {2, 4}) {
    StageFootprint s{0, 4, 4, 64, 1, 4};
    s.expert_shards = ep;
    context::LocalContextGroup group(ep);
    CpuBackend backend(1);
    const double before = troupe::test::heap_bytes_in_use();
    {
      auto stage = std::make_unique<GPTStage>(cfg, backend, 0, 4, DType::f32, Recompute::none, nullptr,
                                              TensorShardGroup{}, ContextShardGroup{}, ExpertGroup{&group.rank(0)});
      stage->reserve(s.B, s.T, s.slots);
      AdamW optimizer(backend, stage->views(), stage->num_params(), DType::f32, AdamWOptions{}, 0, stage->num_params());
      const double allocated = troupe::test::heap_bytes_in_use() - before;
      const MemoryEstimate estimate = estimate_training_memory(cfg, s);
      INFO("expert shards " << ep << ": estimate " << estimate.total() << ", allocated " << allocated);
      CHECK(stage->num_params() == ParameterLayout(cfg, {0, ep}).total());
      CHECK(stage->num_params() < ParameterLayout(cfg).total());
      CHECK(estimate.parameter_bytes == 16.0 * double(stage->num_params()));
      CHECK(estimate.total() == Approx(allocated).epsilon(0.03));
      StageFootprint alone = s;
      alone.expert_shards = 1;
      CHECK(estimate.activation_bytes > estimate_training_memory(cfg, alone).activation_bytes);
    }
  }
}

TEST_CASE("moe GPT: routing of micro-batches adds up, and the load imbalance is the worst block's max over mean",
          "[model][moe]") {
  GPTStage::MoERouting step;
  CHECK(step.load_imbalance() == 0.0);  // no MoE block
  // Two blocks of 4 experts: the first even, the second with 6 of 12 slots on expert 2.
  step.add({1.0, 0.5, 4, {3, 3, 3, 3, 1, 2, 4, 1}}, 0.5);
  step.add({3.0, 1.5, 4, {3, 3, 3, 3, 2, 1, 2, 1}}, 0.5);
  CHECK(step.aux == 2.0);
  CHECK(step.z == 1.0);
  CHECK(step.slots == std::vector<std::int64_t>{6, 6, 6, 6, 3, 3, 6, 2});
  CHECK(step.load_imbalance() == Approx(6.0 * 4 / 14));
  GPTStage::MoERouting other_model;
  other_model.add({0, 0, 2, {1, 1}}, 1.0);
  CHECK_THROWS(other_model.add(step, 1.0));
}

TEST_CASE(
    "moe GPT on two stages: each stage's routing holds its own blocks at their places, and the stages' gradients with "
    "the routing losses are the whole model's",
    "[model][moe][pipeline]") {
  const GPTConfig cfg = narrow_moe_config(1);  // MoE blocks 0 and 1 on the first stage, 2 on the second
  const double aux_coef = 0.5, z_coef = 0.2;
  CpuBackend backend(1);
  GPTStage whole(cfg, backend, 0, 3, DType::f64), first(cfg, backend, 0, 2, DType::f64),
      second(cfg, backend, 2, 3, DType::f64);
  const int B = 2, T = 4;
  for (GPTStage* stage : {&whole, &first, &second}) {
    stage->set_moe_loss_coefficients(aux_coef, z_coef);
    stage->init_parameters(7);
    stage->reserve(B, T);
    stage->zero_grad();
  }
  Tensor tokens = Tensor::zeros({B, T}, DType::i32), targets = Tensor::zeros({B, T}, DType::i32);
  for (int i = 0; i < B * T; ++i) {
    tokens.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(splitmix64(i) % 11);
    targets.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(splitmix64(100 + i) % 11);
  }
  const double loss = whole.forward(0, tokens, targets);
  first.forward(0, tokens);
  CHECK(second.forward(0, first.output(0), targets) == Approx(loss).epsilon(1e-12));

  // The whole model's routing: the first stage's 2 blocks and the second's 1, each at its place.
  const GPTStage::MoERouting all = whole.moe_routing(0), a = first.moe_routing(0), b = second.moe_routing(0);
  REQUIRE(all.slots.size() == 3 * 4);
  REQUIRE(a.slots.size() == all.slots.size());
  REQUIRE(b.slots.size() == all.slots.size());
  for (std::size_t i = 0; i < all.slots.size(); ++i) {
    INFO("block " << i / 4 << ", expert " << i % 4);
    CHECK(a.slots[i] == (i < 8 ? all.slots[i] : 0));
    CHECK(b.slots[i] == (i < 8 ? 0 : all.slots[i]));
  }
  GPTStage::MoERouting summed;
  summed.add(a, 2.0 / 3);
  summed.add(b, 1.0 / 3);
  CHECK(summed.aux == Approx(all.aux).epsilon(1e-12));
  CHECK(summed.z == Approx(all.z).epsilon(1e-12));
  CHECK(summed.slots == all.slots);

  // Backward: each stage adds its MoE blocks' routing-loss gradients itself.
  whole.backward(0, Tensor{});
  second.backward(0, Tensor{});
  first.backward(0, second.input_grad(0));
  for (const GPTStage* stage : {&first, &second})
    for (const ParameterView& view : stage->views()) {
      if (view.name == "wte.weight") continue;  // the tied embedding: its two shares, below
      INFO(view.name);
      const Tensor mine = stage->grad(view.name), theirs = whole.grad(view.name);
      for (std::int64_t i = 0; i < mine.numel(); ++i)
        REQUIRE(mine.data_as<double>()[i] == Approx(theirs.data_as<double>()[i]).margin(1e-12));
    }
  const Tensor lookup = first.tied_embedding_grad(), head = second.tied_embedding_grad(),
               both = whole.tied_embedding_grad();
  for (std::int64_t i = 0; i < both.numel(); ++i)
    REQUIRE(lookup.data_as<double>()[i] + head.data_as<double>()[i] == Approx(both.data_as<double>()[i]).margin(1e-12));
}
