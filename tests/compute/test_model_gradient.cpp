// The whole model's gradient against central finite differences, all in float64: every
// parameter of a small GPT is perturbed, so a wrong backward anywhere (a layer, the residual
// bookkeeping, the tied embedding) shows up under the name of the parameter it corrupts.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/model/gpt.hpp"
#include "compute/random.hpp"

using namespace troupe::compute;

TEST_CASE("GPT gradient equals central finite differences in float64", "[model][gradcheck]") {
  GPTConfig cfg{2, 8, 2, 6, 11, 11};
  CpuBackend backend(1);
  GPT model(cfg, backend, DType::f64);
  model.init_parameters(7);
  // Larger-than-GPT-2 weights so every path carries a signal well above rounding noise.
  double* p = model.params().data_as<double>();
  for (std::int64_t i = 0; i < model.layout().total(); ++i) p[i] += 0.3 * counter_normal(11, 0, i);

  const int B = 2, T = 5;
  model.reserve(B, T);
  Tensor tokens = Tensor::zeros({B, T}, DType::i32), targets = Tensor::zeros({B, T}, DType::i32);
  for (int i = 0; i < B * T; ++i) {
    tokens.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(splitmix64(i) % 11);
    targets.data_as<std::int32_t>()[i] = static_cast<std::int32_t>(splitmix64(100 + i) % 11);
  }
  model.zero_grad();
  model.forward(tokens, targets);
  model.backward();
  const double* g = model.grads().data_as<double>();

  const double h = 1e-5;
  std::printf("whole-model gradient check (float64, h=%g): max relative error per parameter\n", h);
  for (const auto& view : model.layout().views()) {
    double max_rel = 0;
    std::int64_t worst = -1;
    for (std::int64_t i = view.offset; i < view.offset + view.numel(); ++i) {
      double saved = p[i];
      p[i] = saved + h;
      double up = model.forward(tokens, targets);
      p[i] = saved - h;
      double down = model.forward(tokens, targets);
      p[i] = saved;
      double numeric = (up - down) / (2 * h);
      double rel = std::abs(numeric - g[i]) / std::max(1e-7, std::abs(numeric) + std::abs(g[i]));
      if (rel > max_rel) max_rel = rel, worst = i - view.offset;
    }
    std::printf("  %-24s %10.3e\n", view.name.c_str(), max_rel);
    INFO("parameter " << view.name << " element " << worst << " relative error " << max_rel);
    CHECK(max_rel < 1e-5);
  }
}
