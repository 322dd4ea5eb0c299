// DiLoCo's outer step (compute/train/outer_step.hpp) on its own: the Nesterov arithmetic in f64
// against the formula written out, outer SGD with lr 1 and no momentum as the islands' average, and
// the one-process simulation of islands that the multi-process test (tests/apps/commands/
// test_diloco_run.cpp) compares a real run with.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/random.hpp"
#include "compute/train/outer_step.hpp"
#include "compute/train/trainer.hpp"

using namespace troupe::compute;

namespace {

Tensor filled(std::int64_t n, std::uint64_t seed, double scale) {
  Tensor t = Tensor::zeros({n}, DType::f64);
  for (std::int64_t i = 0; i < n; ++i)
    t.data_as<double>()[i] = scale * (uniform_open0(hash_combine(seed, static_cast<std::uint64_t>(i))) - 0.5);
  return t;
}

}  // namespace

TEST_CASE("outer step: Nesterov over three syncs of three islands equals the formula in f64", "[diloco]") {
  constexpr std::int64_t n = 257;
  constexpr int k = 3;
  const double lr = 0.7, mu = 0.9;
  Tensor params = filled(n, 1, 2.0);
  OuterStep outer(params, {5, lr, mu});
  // The formula's own state, kept apart: w_sync and m per element.
  std::vector<double> w_sync(params.data_as<double>(), params.data_as<double>() + n), m(n, 0.0);
  for (int sync = 0; sync < 3; ++sync) {
    // Each island moved from the last sync by its own amount.
    std::vector<Tensor> island;
    Tensor summed = Tensor::zeros({n}, DType::f64), delta = Tensor::zeros({n}, DType::f64);
    for (int i = 0; i < k; ++i) {
      island.push_back(filled(n, 100 + 10 * sync + i, 0.1));
      for (std::int64_t e = 0; e < n; ++e) island.back().data_as<double>()[e] += w_sync[e];
      outer.pseudo_gradient(island.back(), delta);
      for (std::int64_t e = 0; e < n; ++e) summed.data_as<double>()[e] += delta.data_as<double>()[e];
    }
    // Where the step writes (island 0's weights, as a rank's own buffer), kept apart from the islands'.
    Tensor result = filled(n, 0, 0.0);
    std::copy_n(island[0].data_as<double>(), n, result.data_as<double>());
    outer.apply(result, summed, k);
    double worst = 0;
    for (std::int64_t e = 0; e < n; ++e) {
      double mean_weights = 0;
      for (int i = 0; i < k; ++i) mean_weights += island[i].data_as<double>()[e] / k;
      const double big_delta = w_sync[e] - mean_weights;
      m[e] = mu * m[e] + big_delta;
      const double expected = w_sync[e] - lr * big_delta - lr * mu * m[e];
      worst = std::max(worst, std::abs(result.data_as<double>()[e] - expected));
      w_sync[e] = expected;
    }
    INFO("sync " << sync);
    CHECK(worst < 1e-12);
    CHECK(std::abs(outer.momentum().data_as<double>()[7] - m[7]) < 1e-12);
    CHECK(outer.last_sync().data_as<double>()[7] == result.data_as<double>()[7]);
  }
  CHECK(outer.syncs() == 3);
}

TEST_CASE("outer step: lr 1 without momentum gives the islands' weights averaged", "[diloco]") {
  constexpr std::int64_t n = 100;
  Tensor start = filled(n, 2, 1.0);
  OuterStep outer(start, {1, 1.0, 0.0});
  Tensor a = filled(n, 3, 1.0), b = filled(n, 4, 1.0), delta = Tensor::zeros({n}, DType::f64),
         summed = Tensor::zeros({n}, DType::f64);
  outer.pseudo_gradient(a, summed);
  outer.pseudo_gradient(b, delta);
  for (std::int64_t e = 0; e < n; ++e) summed.data_as<double>()[e] += delta.data_as<double>()[e];
  outer.apply(a, summed, 2);
  double worst = 0;
  for (std::int64_t e = 0; e < n; ++e) {
    const double average = (filled(n, 3, 1.0).data_as<double>()[e] + b.data_as<double>()[e]) / 2;
    worst = std::max(worst, std::abs(a.data_as<double>()[e] - average));
  }
  CHECK(worst < 1e-15);
}

TEST_CASE("outer step: due every H steps and after the last", "[diloco]") {
  OuterStep outer(Tensor::zeros({1}, DType::f32), {4, 0.7, 0.9});
  CHECK(!outer.due(3, 10));
  CHECK(outer.due(4, 10));
  CHECK(outer.due(8, 10));
  CHECK(!outer.due(9, 10));
  CHECK(outer.due(10, 10));
}

TEST_CASE("simulated islands at H 1, lr 1, no momentum: every step's weights are the islands' average", "[diloco]") {
  const GPTConfig config{2, 32, 4, 32, 64, 64};
  std::vector<std::uint16_t> data(4096);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::uint16_t>(hash_combine(17, i) % 64);
  CpuBackend backend(1);
  TrainerOptions o;
  o.seq_len = 32;
  o.batch_size = 2;
  o.lr = {1e-3, 1e-4, 1, 4};
  o.islands = 2;
  constexpr long steps = 3;
  // The simulation: two islands, the outer step averaging them after every step.
  std::vector<std::unique_ptr<GPT>> models;
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<SimulatedIsland> islands;
  std::vector<OuterStep> outer;
  // By hand: the same two trainers, their weights averaged after every step.
  std::vector<std::unique_ptr<GPT>> hand_models;
  std::vector<std::unique_ptr<Trainer>> hand;
  for (int i = 0; i < 2; ++i) {
    o.island = i;
    for (auto* set : {&models, &hand_models}) {
      set->push_back(std::make_unique<GPT>(config, backend, DType::f32));
      set->back()->init_parameters(5);
    }
    trainers.push_back(std::make_unique<Trainer>(*models.back(), o, data, data));
    hand.push_back(std::make_unique<Trainer>(*hand_models.back(), o, data, data));
    islands.push_back({[t = trainers.back().get()] { t->step(); }, models.back()->params()});
    outer.emplace_back(models.back()->params(), OuterOptions{1, 1.0, 0.0});
  }
  train_islands(islands, outer, 0, steps);
  const std::int64_t n = models[0]->params().numel();
  for (long s = 0; s < steps; ++s) {
    for (auto& t : hand) t->step();
    float* a = hand_models[0]->params().data_as<float>();
    float* b = hand_models[1]->params().data_as<float>();
    for (std::int64_t e = 0; e < n; ++e) a[e] = b[e] = (a[e] + b[e]) / 2;
  }
  double worst = 0, moved = 0;
  std::int64_t islands_apart = 0;
  const float* sim0 = models[0]->params().data_as<float>();
  const float* sim1 = models[1]->params().data_as<float>();
  const float* by_hand = hand_models[0]->params().data_as<float>();
  GPT fresh(config, backend, DType::f32);
  fresh.init_parameters(5);
  for (std::int64_t e = 0; e < n; ++e) {
    islands_apart += sim0[e] != sim1[e];
    worst = std::max(worst, double(std::abs(sim0[e] - by_hand[e])));
    moved = std::max(moved, double(std::abs(sim0[e] - fresh.params().data_as<float>()[e])));
  }
  CHECK(islands_apart == 0);
  CHECK(moved > 1e-4);  // the steps did move the weights
  CHECK(worst < 1e-6);  // the outer step's w_sync − mean(w_sync − w_i) rounds apart from mean(w_i)
}
