// Tensor shards of a model with experts: T threads stand for the T shards of a tensor group
// (support/thread_tensor_group.hpp), each holding every expert's slice of its hidden width, and
// take moe-tiny's step — forward, backward with both routing losses, AdamW — as one process takes
// it: every shard's parameter and gradient slice equals the matching global elements of the
// one-process run: the loss, the routing losses and every gradient within 1e-12 (f64, per
// parameter, relative to its norm); the parameters after AdamW's step within 1e-11, as AdamW's
// first step divides each element's gradient by its own size, so the rounding of an element near
// eps moves its step by more (the attention's qkv bias comes out near 4e-12: its key part's true
// gradient is 0, test_model_tensor_shards.cpp; the rest at most 1.1e-12). The router's gradient
// is the same on every shard, bit for bit: a replicated parameter that no sum over the shards
// reconciles.

#include <catch2/catch.hpp>

#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "compute/context/local_exchange.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/model/gpt_stage.hpp"
#include "compute/model/memory_estimate.hpp"
#include "compute/model/tensor_shard.hpp"
#include "compute/optim/adamw.hpp"
#include "compute/random.hpp"
#include "support/heap_bytes.hpp"
#include "support/tensor_compare.hpp"
#include "support/thread_tensor_group.hpp"

using namespace troupe::compute;
using troupe::test::on_tensor_shards;
using troupe::test::ThreadGroup;

namespace {

constexpr int B = 2, T = 16;
// Large enough that the router's gradient is mostly the losses' and their share of the input's.
constexpr double shard_aux_coef = 0.5, shard_z_coef = 0.2;

GPTConfig moe_tiny(int shared_experts) {
  GPTConfig config = *gpt_preset("moe-tiny");
  config.shared_experts = shared_experts;
  return config;
}

struct Batch {
  Tensor tokens = Tensor::zeros({B, T}, DType::i32), targets = Tensor::zeros({B, T}, DType::i32);
  explicit Batch(int vocab) {
    for (int i = 0; i < B * T; ++i) {
      tokens.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(hash_combine(5, i) % vocab);
      targets.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(hash_combine(6, i) % vocab);
    }
  }
};

struct StepState {
  double loss = 0, aux = 0, z = 0;
  Tensor params, grads;  // host copies after the step (grads before the update)
  std::vector<GPTStage::Run> runs;
  std::vector<ParameterView> views;
  std::vector<double> router_grads;  // every MoE block's router gradient, in order
};

StepState take_step(GPTStage& stage, Backend& backend, const GPTConfig& config,
                    const std::function<void(Tensor)>& sum_over_shards = {}) {
  stage.set_moe_loss_coefficients(shard_aux_coef, shard_z_coef);
  stage.init_parameters(21);
  stage.reserve(B, T, 1);
  stage.zero_grad();
  const Batch batch(config.vocab_size);
  StepState out;
  out.loss = stage.forward(0, batch.tokens, batch.targets);
  const GPTStage::MoERouting routing = stage.moe_routing(0);
  out.aux = routing.aux;
  out.z = routing.z;
  stage.backward(0, Tensor{}, 1.0);
  for (const Tensor& partial : stage.sequence_partial_grads()) sum_over_shards(partial);
  out.grads = troupe::test::host_copy(backend, stage.grads());
  for (const ParameterView& v : stage.views())
    if (v.name.find("mlp.router") != std::string::npos)
      for (std::int64_t i = v.offset; i < v.offset + v.numel(); ++i)
        out.router_grads.push_back(out.grads.data_as<double>()[i]);
  AdamW adamw(backend, stage.views(), stage.num_params(), DType::f64, AdamWOptions{}, 0, stage.num_params());
  adamw.step(stage.params(), stage.grads(), 1e-2);
  out.params = troupe::test::host_copy(backend, stage.params());
  out.runs = stage.global_runs();
  out.views = stage.views();
  return out;
}

StepState one_process(const GPTConfig& config) {
  CpuBackend backend(1);
  GPTStage whole(config, backend, 0, config.n_layer, DType::f64);
  return take_step(whole, backend, config);
}

std::vector<StepState> sharded(const GPTConfig& config, int shards, bool sequence_parallel,
                               Recompute recompute = Recompute::none) {
  return on_tensor_shards(shards, sequence_parallel, [&](CpuBackend& backend, TensorShardGroup& member) {
    GPTStage stage(config, backend, 0, config.n_layer, DType::f64, recompute, nullptr, member);
    return take_step(stage, backend, config, [&member](Tensor t) { member.all_reduce(t); });
  });
}

// The largest, over the shard's parameters, of |local - global| / |global| as vector norms, the
// global elements read where the shard's runs say they sit.
double worst_relative(const Tensor& local, const Tensor& global, const StepState& shard, std::string& worst_name) {
  std::vector<double> expected(static_cast<std::size_t>(local.numel()));
  for (const GPTStage::Run& r : shard.runs)
    for (std::int64_t k = 0; k < r.count; ++k)
      expected[static_cast<std::size_t>(r.local + k)] = global.data_as<double>()[r.global + k];
  return troupe::test::worst_relative<double>(local, expected, shard.views, worst_name);
}

void check_against_one_process(const GPTConfig& config, int shards, bool sequence_parallel) {
  const StepState whole = one_process(config);
  const std::vector<StepState> parts = sharded(config, shards, sequence_parallel);
  for (int s = 0; s < shards; ++s) {
    const StepState& part = parts[static_cast<std::size_t>(s)];
    INFO("shard " << s << " of " << shards << (sequence_parallel ? ", sequence parallel" : "") << ", shared experts "
                  << config.shared_experts);
    CHECK(part.loss == Approx(whole.loss).epsilon(1e-12));
    CHECK(part.aux == Approx(whole.aux).epsilon(1e-12));
    CHECK(part.z == Approx(whole.z).epsilon(1e-12));
    CHECK(part.router_grads == parts[0].router_grads);
    std::string name;
    const double grads = worst_relative(part.grads, whole.grads, part, name);
    INFO("gradient of " << name);
    CHECK(grads <= 1e-12);
    const double params = worst_relative(part.params, whole.params, part, name);
    INFO("parameter " << name);
    CHECK(params <= 1e-11);
  }
}

}  // namespace

TEST_CASE("moe tensor shards: shard_view splits each expert's c_fc rows and c_proj columns, the router replicated",
          "[moe]") {
  const GPTConfig config = moe_tiny(1);
  const ParameterLayout layout(config);
  const std::int64_t E = config.experts, C = config.n_embd, H = 4 * C;
  const TensorShard second{1, 2};
  const ParameterView& fc = layout.find("h.1.mlp.experts.c_fc.weight");
  const ShardedView f = shard_view(fc, config, second);
  CHECK(f.shape == Shape{E, H / 2, C});
  REQUIRE(f.runs.size() == static_cast<std::size_t>(E));  // each expert's second half of its rows
  CHECK(f.runs[2].local == 2 * (H / 2) * C);
  CHECK(f.runs[2].global == fc.offset + (2 * H + H / 2) * C);
  CHECK(f.runs[2].count == (H / 2) * C);
  const ShardedView fb = shard_view(layout.find("h.1.mlp.experts.c_fc.bias"), config, second);
  CHECK(fb.shape == Shape{E, H / 2});
  const ParameterView& proj = layout.find("h.1.mlp.experts.c_proj.weight");
  const ShardedView p = shard_view(proj, config, {3, 4});
  CHECK(p.shape == Shape{E, C, H / 4});
  REQUIRE(p.runs.size() == static_cast<std::size_t>(E * C));  // each expert's output rows, a quarter each
  CHECK(p.runs[C + 5].local == (C + 5) * (H / 4));
  CHECK(p.runs[C + 5].global == proj.offset + (C + 5) * H + 3 * (H / 4));
  const ShardedView shared = shard_view(layout.find("h.1.mlp.shared_expert.c_proj.weight"), config, second);
  CHECK(shared.shape == Shape{C, H / 2});
  CHECK(shard_view(layout.find("h.1.mlp.router.weight"), config, second).replicated);
  CHECK(shard_view(layout.find("h.1.mlp.experts.c_proj.bias"), config, second).replicated);
}

TEST_CASE("moe tensor shards: the shards' slices cover every global parameter once, replicated ones on every shard",
          "[moe]") {
  const GPTConfig config = moe_tiny(1);
  const std::int64_t total = ParameterLayout(config).total();
  for (int shards : {2, 4}) {
    std::vector<int> held(static_cast<std::size_t>(total), 0), replicated(static_cast<std::size_t>(total), 0);
    CpuBackend backend(1);
    for (int s = 0; s < shards; ++s) {
      ThreadGroup unused(shards);
      GPTStage stage(config, backend, 0, config.n_layer, DType::f32, Recompute::none, nullptr, unused.member(s));
      for (const GPTStage::Run& r : stage.global_runs())
        for (std::int64_t k = 0; k < r.count; ++k) ++(r.replicated ? replicated : held)[r.global + k];
    }
    for (std::int64_t i = 0; i < total; ++i) {
      INFO("global element " << i << " with " << shards << " shards");
      REQUIRE(((held[i] == 1 && replicated[i] == 0) || (held[i] == 0 && replicated[i] == shards)));
    }
  }
}

TEST_CASE(
    "moe tensor shards: moe-tiny on 2 and 4 shards takes the one-process step in f64, every gradient within 1e-12",
    "[moe]") {
  for (const int shared : {0, 1}) {
    check_against_one_process(moe_tiny(shared), 2, false);
    check_against_one_process(moe_tiny(shared), 4, false);
  }
}

TEST_CASE("moe tensor shards: with sequence parallelism every shard routes all the rows and takes the one-process step",
          "[moe]") {
  check_against_one_process(moe_tiny(1), 2, true);
  check_against_one_process(moe_tiny(0), 4, true);
}

TEST_CASE("moe tensor shards: a full recompute under shards gives the gradients of keeping everything, bitwise",
          "[moe]") {
  const GPTConfig config = moe_tiny(1);
  const std::vector<StepState> kept = sharded(config, 2, false);
  const std::vector<StepState> recomputed = sharded(config, 2, false, Recompute::full);
  for (std::size_t s = 0; s < 2; ++s) {
    CHECK(troupe::test::bitwise_equal(kept[s].grads, recomputed[s].grads));
    CHECK(kept[s].loss == recomputed[s].loss);
  }
}

// As test_moe_model.cpp checks one process: what a shard's stage and its AdamW allocate, counted by
// the allocator, against the estimate of a shard.
TEST_CASE(
    "moe tensor shards: a shard's memory estimate alone and inside expert shards is within 3 percent of what it and "
    "its AdamW allocate",
    "[moe]") {
  GPTConfig config{4, 64, 4, 64, 256, 256};
  config.experts = 4;
  config.top_k = 2;
  config.moe_every = 2;
  for (const int shared : {0, 1})
    for (const int shards : {2, 4})
      for (const int expert_shards : {1, 2}) {
        config.shared_experts = shared;
        StageFootprint footprint{0, 4, 4, 64, 1, 4};
        footprint.shards = shards;
        footprint.expert_shards = expert_shards;
        CpuBackend backend(1);
        ThreadGroup unused(shards);
        troupe::compute::context::LocalContextGroup expert_group(expert_shards);
        const ExpertGroup experts{expert_shards > 1 ? &expert_group.rank(expert_shards - 1) : nullptr};
        const double before = troupe::test::heap_bytes_in_use();
        {
          auto stage = std::make_unique<GPTStage>(config, backend, 0, 4, DType::f32, Recompute::none, nullptr,
                                                  unused.member(shards - 1), ContextShardGroup{}, experts);
          stage->reserve(footprint.B, footprint.T, footprint.slots);
          AdamW optimizer(backend, stage->views(), stage->num_params(), DType::f32, AdamWOptions{}, 0,
                          stage->num_params());
          const double allocated = troupe::test::heap_bytes_in_use() - before;
          const MemoryEstimate estimate = estimate_training_memory(config, footprint);
          INFO(shards << " shards, " << expert_shards << " expert shards, shared " << shared << ": estimate "
                      << estimate.total() << ", allocated " << allocated);
          CHECK(estimate.parameter_bytes == 16.0 * double(stage->num_params()));
          CHECK(estimate.total() == Approx(allocated).epsilon(0.03));
        }
      }
}
