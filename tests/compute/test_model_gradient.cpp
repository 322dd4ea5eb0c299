// The whole model's gradient against central finite differences, all in float64: every
// parameter of a small GPT is perturbed, so a wrong backward anywhere (a layer, the residual
// bookkeeping, the tied embedding) shows up under the name of the parameter it corrupts. How a
// difference quotient can be off, and why the check is atol + rtol: support/finite_difference.hpp.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/model/gpt.hpp"
#include "compute/random.hpp"
#include "support/finite_difference.hpp"

using namespace troupe::compute;
using troupe::test::central_difference;
using troupe::test::GradientTolerance;
using troupe::test::rounding_unit;

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
  const double loss = model.forward(tokens, targets);
  model.backward();
  const double* g = model.grads().data_as<double>();

  // h = 1e-4: the fourth-order truncation, about 1e-9 at h = 1e-3 and falling as h⁴, is near
  // 1e-13 here, below the rounding unit ulp(loss)/h = 4.4e-12. The loss is a mean of positive
  // cross-entropies, so its rounding scales with the loss itself.
  // atol, 16 rounding units: the quotient is off by 1.5 units per ulp each evaluation is off (see
  // rounding_unit); measured at most 2.1 units over every parameter once the dloss scaling below
  // is taken out, so this leaves each evaluated loss about 10 ulp, room for kernels that round
  // differently on another CPU.
  // rtol, 1e-7: the backend's single-precision dloss, float(1/10), is 1.5e-8 above 1/10 and
  // scales every gradient of this batch of 10 positions with it.
  // A 0.1 % error then fails in any element larger than 1000 atol, 7e-8.
  const double h = 1e-4;
  const GradientTolerance tolerance{16 * rounding_unit(loss, h), 1e-7};
  std::printf("whole-model gradient check (float64, h=%g, atol %.2g, rtol %.0e): worst share of the tolerance\n", h,
              tolerance.atol, tolerance.rtol);
  for (const auto& view : model.layout().views()) {
    double worst = 0, largest = 0, worst_numeric = 0;
    std::int64_t worst_at = -1;
    for (std::int64_t i = view.offset; i < view.offset + view.numel(); ++i) {
      const double numeric = central_difference(p[i], h, [&] { return model.forward(tokens, targets); });
      const double used = tolerance.used(numeric, g[i]);
      if (used > worst || worst_at < 0) worst = used, worst_at = i, worst_numeric = numeric;
      largest = std::max(largest, std::abs(numeric));
    }
    std::printf("  %-24s %8.3f\n", view.name.c_str(), worst);
    INFO("parameter " << view.name << " element " << worst_at - view.offset << ": analytic " << g[worst_at]
                      << ", numeric " << worst_numeric << ", difference " << std::abs(g[worst_at] - worst_numeric)
                      << " against the allowed " << tolerance.atol << " + " << tolerance.rtol << " x |numeric|");
    CHECK(worst <= 1.0);
    // Not vacuous: somewhere in the tensor a 0.1 % error would exceed the tolerance.
    CHECK(largest * 1e-3 > tolerance.atol + tolerance.rtol * largest);
  }
}
