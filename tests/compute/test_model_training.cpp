// Training-level anchors that need no corpus: determinism, micro-batch accumulation, overfitting
// one batch, and the parameter count of GPT-2 124M.

#include <catch2/catch.hpp>

#include <cstring>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/model/gpt.hpp"
#include "compute/random.hpp"
#include "compute/train/trainer.hpp"

using namespace troupe::compute;

namespace {

std::vector<std::uint16_t> random_stream(std::size_t n, int vocab, std::uint64_t seed) {
  std::vector<std::uint16_t> s(n);
  for (std::size_t i = 0; i < n; ++i) s[i] = static_cast<std::uint16_t>(hash_combine(seed, i) % vocab);
  return s;
}

GPTConfig micro_config() { return GPTConfig{2, 32, 4, 32, 64, 64}; }

std::vector<double> train_losses(const GPTConfig& cfg, TrainerOptions options, int steps,
                                 const std::vector<std::uint16_t>& data, std::vector<float>* final_params = nullptr) {
  CpuBackend backend(1);
  GPT model(cfg, backend);
  model.init_parameters(options.seed);
  Trainer trainer(model, options, data, data);
  std::vector<double> losses;
  for (int i = 0; i < steps; ++i) losses.push_back(trainer.step().loss);
  if (final_params) {
    const float* p = model.params().data_as<float>();
    final_params->assign(p, p + model.layout().total());
  }
  return losses;
}

// Five steps of two micro-batches: the runs the interrupted-step tests take, given up part-way.
TrainerOptions interrupted_options() {
  TrainerOptions o;
  o.batch_size = 2;
  o.seq_len = 32;
  o.grad_accum = 2;
  o.lr = {1e-3, 1e-4, 1, 5};
  return o;
}

}  // namespace

TEST_CASE("two runs with the same seed give bitwise-identical losses", "[model][determinism]") {
  auto data = random_stream(20000, 64, 3);
  TrainerOptions o;
  o.batch_size = 4;
  o.seq_len = 32;
  o.lr = {1e-3, 1e-4, 2, 6};
  std::vector<float> params_a, params_b;
  auto a = train_losses(micro_config(), o, 6, data, &params_a);
  auto b = train_losses(micro_config(), o, 6, data, &params_b);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(std::memcmp(&a[i], &b[i], sizeof(double)) == 0);
  CHECK(std::memcmp(params_a.data(), params_b.data(), params_a.size() * sizeof(float)) == 0);
  o.seed += 1;
  auto c = train_losses(micro_config(), o, 6, data);
  CHECK(c != a);  // the seed does steer initialisation and data order
}

TEST_CASE("gradient accumulation of 2 x b/2 equals one batch of b", "[model][accumulation]") {
  auto data = random_stream(20000, 64, 5);
  TrainerOptions whole;
  whole.batch_size = 4;
  whole.seq_len = 32;
  whole.lr = {1e-3, 1e-4, 0, 4};
  TrainerOptions halves = whole;
  halves.batch_size = 2;
  halves.grad_accum = 2;
  std::vector<float> pa, pb;
  auto a = train_losses(micro_config(), whole, 4, data, &pa);
  auto b = train_losses(micro_config(), halves, 4, data, &pb);
  for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(1e-5));
  double max_diff = 0;
  for (std::size_t i = 0; i < pa.size(); ++i) max_diff = std::max(max_diff, double(std::abs(pa[i] - pb[i])));
  INFO("max parameter difference " << max_diff);
  CHECK(max_diff < 1e-5);
}

TEST_CASE("the model overfits one small batch to near-zero loss", "[model][overfit]") {
  GPTConfig cfg{2, 64, 4, 32, 64, 64};
  CpuBackend backend(1);
  GPT model(cfg, backend);
  model.init_parameters(1);
  const int B = 2, T = 32;
  model.reserve(B, T);
  auto data = random_stream(B * T + 1, 64, 9);
  Tensor inputs = Tensor::zeros({B, T}, DType::i32), targets = Tensor::zeros({B, T}, DType::i32);
  for (int i = 0; i < B * T; ++i) {
    inputs.data_as<std::int32_t>()[i] = data[i];
    targets.data_as<std::int32_t>()[i] = data[i + 1];
  }
  AdamW optimizer(backend, model.layout(), DType::f32, AdamWOptions{0.9, 0.95, 1e-8, 0.0});
  double first = 0, last = 0;
  for (int step = 0; step < 150; ++step) {
    model.zero_grad();
    last = model.forward(inputs, targets);
    if (step == 0) first = last;
    model.backward();
    optimizer.step(model.params(), model.grads(), 3e-3);
  }
  INFO("loss went from " << first << " to " << last);
  CHECK(first > 3.5);
  CHECK(last < 0.05);
}

TEST_CASE("gpt2 preset has GPT-2 124M's parameter count (vocabulary padded to 50304)", "[model][layout]") {
  GPTConfig cfg = *gpt_preset("gpt2");
  ParameterLayout layout(cfg);
  // 124,439,808 with V = 50257, plus 47 padded rows of 768.
  CHECK(layout.total() == 124439808 + 47 * 768);
  // Each layer's parameters are one contiguous slice, and the layers tile the middle of the buffer.
  auto [b0, e0] = layout.layer_range(0);
  auto [b1, e1] = layout.layer_range(1);
  CHECK(e0 == b1);
  CHECK(e1 - b1 == e0 - b0);
  CHECK(b0 == layout.find("wpe.weight").offset + 1024 * 768);
  for (const auto& v : layout.views()) CHECK(v.decay == (v.shape.size() == 2));
}

TEST_CASE("a step given up between layers leaves parameters and moments untouched, and taken again equals the "
          "uninterrupted run",
          "[model][interrupt]") {
  auto data = random_stream(20000, 64, 9);
  const TrainerOptions o = interrupted_options();
  std::vector<float> undisturbed;
  train_losses(micro_config(), o, 5, data, &undisturbed);

  struct GiveUp {};
  const int layers = micro_config().n_layer;
  const int calls_per_step = 2 * layers * o.grad_accum;  // before each layer's forward, after each one's backward
  for (int give_up_at = 0; give_up_at < calls_per_step; ++give_up_at) {
    CpuBackend backend(1);
    GPT model(micro_config(), backend);
    model.init_parameters(o.seed);
    int calls = -1;  // counted from step 3 on
    TrainerOptions hooked = o;
    hooked.data_parallel.between_layers = [&calls, give_up_at] {
      if (calls >= 0 && calls++ == give_up_at) throw GiveUp{};
    };
    Trainer trainer(model, hooked, data, data);
    for (int i = 0; i < 2; ++i) trainer.step();
    const std::vector<float> params(model.params().data_as<float>(),
                                    model.params().data_as<float>() + model.params().numel());
    const Tensor& m = trainer.optimizer().first_moments();
    const std::vector<float> moments(m.data_as<float>(), m.data_as<float>() + m.numel());
    calls = 0;
    CHECK_THROWS_AS(trainer.step(), GiveUp);
    CHECK(std::memcmp(params.data(), model.params().data_as<float>(), params.size() * sizeof(float)) == 0);
    CHECK(std::memcmp(moments.data(), m.data_as<float>(), moments.size() * sizeof(float)) == 0);
    for (int i = 2; i < 5; ++i) trainer.step();
    CHECK(calls == give_up_at + 1 + 3 * calls_per_step);
    CHECK(std::memcmp(undisturbed.data(), model.params().data_as<float>(), undisturbed.size() * sizeof(float)) == 0);
  }
}

namespace {

// A trainer whose model keeps its parameters through ZeRO-3's source, at one position: it still
// gathers each block into a copy of its own and hands out unit gradients, as every position does.
struct ShardedRun {
  CpuBackend backend{1};
  ShardedParameters source;
  GPT model;
  Trainer trainer;

  ShardedRun(TrainerOptions o, const std::vector<std::uint16_t>& data, bool reshard_after_forward)
      : source(backend, GPT::parameter_units(micro_config()), DType::f32, 0,
               {0, ParameterLayout(micro_config()).total()}, {}, reshard_after_forward),
        model(micro_config(), backend, DType::f32, Recompute::none, &source),
        trainer(initialised(model, o.seed), with_source(o), data, data) {}

  static GPT& initialised(GPT& model, std::uint64_t seed) {
    model.init_parameters(seed);
    return model;
  }

  TrainerOptions with_source(TrainerOptions o) {
    o.data_parallel.zero_stage = ZeroStage::parameters;
    o.data_parallel.sharded = &source;
    return o;
  }
  // Parameters and both moments.
  std::vector<std::vector<float>> state() {
    std::vector<std::vector<float>> out;
    for (const Tensor* t : {&model.params(), &trainer.optimizer().first_moments(), &trainer.optimizer().second_moments()})
      out.emplace_back(t->data_as<float>(), t->data_as<float>() + t->numel());
    return out;
  }
  void restore(const std::vector<std::vector<float>>& saved) {
    Tensor* into[] = {&model.params(), &trainer.optimizer().first_moments(), &trainer.optimizer().second_moments()};
    for (std::size_t i = 0; i < saved.size(); ++i)
      std::memcpy(into[i]->data_as<float>(), saved[i].data(), saved[i].size() * sizeof(float));
  }
};

}  // namespace

// A rollback restores an older state into a trainer that gave up a step part-way: what that step
// had gathered (copies of newer parameters) and the unit gradients it held must be forgotten.
TEST_CASE("a ZeRO-3 step given up between layers and rolled back to an older state is forgotten by abandon_step, and "
          "the run taken again equals the uninterrupted one",
          "[model][interrupt][zero3]") {
  auto data = random_stream(20000, 64, 11);
  const TrainerOptions o = interrupted_options();
  struct GiveUp {};
  const int calls_per_step = 2 * micro_config().n_layer * o.grad_accum;
  for (const bool reshard : {true, false}) {
    ShardedRun undisturbed(o, data, reshard);
    for (int i = 0; i < 5; ++i) undisturbed.trainer.step();
    const std::vector<float> expected = undisturbed.state()[0];
    for (int give_up_at = 0; give_up_at < calls_per_step; ++give_up_at) {
      INFO("reshard_after_forward " << reshard << ", given up at call " << give_up_at);
      int calls = -1;
      TrainerOptions hooked = o;
      hooked.data_parallel.between_layers = [&calls, give_up_at] {
        if (calls >= 0 && calls++ == give_up_at) throw GiveUp{};
      };
      ShardedRun run(hooked, data, reshard);
      run.trainer.step();
      const auto after_one = run.state();
      run.trainer.step();
      calls = 0;
      CHECK_THROWS_AS(run.trainer.step(), GiveUp);
      run.trainer.abandon_step();
      run.restore(after_one);
      run.trainer.resume_at(1);
      calls = -1;
      for (int i = 1; i < 5; ++i) run.trainer.step();
      CHECK(std::memcmp(expected.data(), run.model.params().data_as<float>(), expected.size() * sizeof(float)) == 0);
    }
  }
}
