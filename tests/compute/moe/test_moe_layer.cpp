// The mixture-of-experts MLP (compute/moe/moe_layer.hpp) in float64 through the CpuBackend: every
// input and parameter gradient, the router's included, against finite differences of the loss
// L = sum(out * R) + aux_coef · aux + z_coef · z (both routing losses in it); the routing itself
// against hand-computed cases; dispatch and combine against a token-by-token reference; an expert
// that receives no tokens; f32 against f64.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/moe/moe_layer.hpp"
#include "support/finite_difference.hpp"
#include "support/moe_layer_shape.hpp"
#include "support/random_tensor.hpp"

using namespace troupe::compute;
using troupe::test::central_difference;
using troupe::test::GradientTolerance;
using troupe::test::rounding_unit;

namespace {

using troupe::test::normal_tensor;

using namespace troupe::test::moe_layer_shape;
constexpr double aux_coef = 0.7, z_coef = 0.3;
// As in test_layer_gradients.cpp: h, rounding units allowed, and relative tolerance.
constexpr double fd_step = 1e-4, atol_units = 16, rtol = 1e-9;

Tensor as(const Tensor& t, DType dtype) {
  Tensor out = Tensor::zeros(t.shape(), dtype);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double x = t.dtype() == DType::f64 ? t.data_as<double>()[i] : t.data_as<float>()[i];
    if (dtype == DType::f64)
      out.data_as<double>()[i] = x;
    else
      out.data_as<float>()[i] = static_cast<float>(x);
  }
  return out;
}

MoEShape shape(bool shared = true) { return MoEShape{E, K, shared, C, H}; }

MoEWeights random_weights(std::mt19937& rng, bool shared, DType dtype = DType::f64) {
  MoEWeights w;
  w.router = normal_tensor({E, C}, rng, 0.8, 0.0, dtype);
  w.fc_w = normal_tensor({E, H, C}, rng, 0.5, 0.0, dtype);
  w.fc_b = normal_tensor({E, H}, rng, 0.3, 0.0, dtype);
  w.proj_w = normal_tensor({E, C, H}, rng, 0.5, 0.0, dtype);
  w.proj_b = normal_tensor({E, C}, rng, 0.3, 0.0, dtype);
  if (shared) {
    w.shared_fc_w = normal_tensor({H, C}, rng, 0.5, 0.0, dtype);
    w.shared_fc_b = normal_tensor({H}, rng, 0.3, 0.0, dtype);
    w.shared_proj_w = normal_tensor({C, H}, rng, 0.5, 0.0, dtype);
    w.shared_proj_b = normal_tensor({C}, rng, 0.3, 0.0, dtype);
  }
  return w;
}

struct Named {
  std::string name;
  Tensor* value;
  Tensor* grad;
};

std::vector<Named> parameters(MoEWeights& w, MoEWeights& g) {
  std::vector<Named> all = {{"router", &w.router, &g.router},
                            {"fc_w", &w.fc_w, &g.fc_w},
                            {"fc_b", &w.fc_b, &g.fc_b},
                            {"proj_w", &w.proj_w, &g.proj_w},
                            {"proj_b", &w.proj_b, &g.proj_b}};
  if (w.has_shared()) {
    all.push_back({"shared_fc_w", &w.shared_fc_w, &g.shared_fc_w});
    all.push_back({"shared_fc_b", &w.shared_fc_b, &g.shared_fc_b});
    all.push_back({"shared_proj_w", &w.shared_proj_w, &g.shared_proj_w});
    all.push_back({"shared_proj_b", &w.shared_proj_b, &g.shared_proj_b});
  }
  return all;
}

MoEAllocate allocator(DType dtype) {
  return [dtype](std::int64_t numel) { return Tensor::zeros({numel}, dtype); };
}

// One forward of the layer and the loss the tests differentiate.
struct Harness {
  CpuBackend backend{1};
  MoEActivations act;
  Tensor out;
  Tensor R;
  Harness(bool shared, DType dtype, std::mt19937& rng)
      : act(make_moe_activations(shape(shared), N, allocator(dtype))),
        out(Tensor::zeros({N, C}, dtype)),
        R(normal_tensor({N, C}, rng, 1.0, 0.0, dtype)) {}

  struct Loss {
    double value = 0, magnitude = 0;
  };
  Loss loss(const Tensor& x, const MoEWeights& w) {
    moe_forward(backend, out, act, x, w, K);
    Loss l{aux_coef * act.plan.aux_loss + z_coef * act.plan.z_loss,
           aux_coef * act.plan.aux_loss + z_coef * act.plan.z_loss};
    for (std::int64_t i = 0; i < out.numel(); ++i) {
      const double term = out.data_as<double>()[i] * R.data_as<double>()[i];
      l.value += term;
      l.magnitude += std::abs(term);
    }
    return l;
  }
};

// The k-th and (k+1)-th largest logits of every token stand far enough apart that no finite-
// difference step changes which experts are chosen.
double smallest_choice_margin(const MoEActivations& a) {
  double margin = 1e300;
  for (std::int64_t t = 0; t < N; ++t) {
    std::vector<double> row(a.logits.data_as<double>() + t * E, a.logits.data_as<double>() + (t + 1) * E);
    std::sort(row.rbegin(), row.rend());
    margin = std::min(margin, row[K - 1] - row[K]);
  }
  return margin;
}

void check_gradient(const std::string& what, Tensor& x, const Tensor& analytic,
                    const std::function<Harness::Loss()>& loss, bool may_be_zero = false) {
  const double unit = rounding_unit(loss().magnitude, fd_step);
  const GradientTolerance tolerance{atol_units * unit, rtol};
  double worst = 0, largest = 0;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double n = central_difference(x.data_as<double>()[i], fd_step, [&] { return loss().value; });
    worst = std::max(worst, tolerance.used(n, analytic.data_as<double>()[i]));
    largest = std::max(largest, std::abs(n));
  }
  INFO("d" << what << ": worst share of the tolerance " << worst);
  CHECK(worst <= 1.0);
  if (!may_be_zero) CHECK(largest * 1e-3 > tolerance.atol + tolerance.rtol * largest);
}

void gradient_check(bool shared, std::uint32_t seed) {
  std::mt19937 rng(seed);
  Harness h(shared, DType::f64, rng);
  Tensor x = normal_tensor({N, C}, rng, 1.0);
  MoEWeights w = random_weights(rng, shared);
  auto loss = [&] { return h.loss(x, w); };
  loss();
  REQUIRE(smallest_choice_margin(h.act) > 1e-2);
  MoEWeights g = zeros_like(w);
  MoEScratch scratch = make_moe_scratch(shape(shared), N, allocator(DType::f64));
  Tensor dx = Tensor::zeros({N, C}, DType::f64);
  moe_backward(h.backend, dx, g, scratch, h.R, h.act, x, w, aux_coef, z_coef);
  check_gradient("x", x, dx, loss);
  for (const Named& p : parameters(w, g)) check_gradient(p.name, *p.value, *p.grad, loss);
}

}  // namespace

TEST_CASE("moe layer: input, router and expert gradients match finite differences, both losses included",
          "[gradcheck]") {
  SECTION("with a shared expert") { gradient_check(true, 31); }
  SECTION("without") { gradient_check(false, 32); }
}

TEST_CASE("moe router: equal logits tie to the lowest experts, gates 1/k, aux loss 1 and z loss log(E)^2") {
  Tensor logits = Tensor::zeros({N, E}, DType::f64), probs = Tensor::zeros({N, E}, DType::f64);
  Tensor lse = Tensor::zeros({N}, DType::f64), gates = Tensor::zeros({N, K}, DType::f64);
  RoutingPlan plan;
  route(plan, probs, lse, gates, logits, K);
  for (std::int64_t t = 0; t < N; ++t)
    for (int j = 0; j < K; ++j) {
      CHECK(plan.expert[static_cast<std::size_t>(t * K + j)] == j);
      CHECK(gates.data_as<double>()[t * K + j] == Approx(1.0 / K).epsilon(1e-15));
    }
  CHECK(plan.count(0) == N);
  CHECK(plan.count(E - 1) == 0);
  // f = 1/k for the first k experts, P = 1/E for all: E · k · (1/k)(1/E) = 1.
  CHECK(plan.aux_loss == Approx(1.0).epsilon(1e-14));
  CHECK(plan.z_loss == Approx(std::log(double(E)) * std::log(double(E))).epsilon(1e-14));
}

TEST_CASE("moe layer: every token's k slots are dispatched and combined exactly once") {
  std::mt19937 rng(41);
  Harness h(true, DType::f64, rng);
  const Tensor x = normal_tensor({N, C}, rng, 1.0);
  const MoEWeights w = random_weights(rng, true);
  h.loss(x, w);
  const RoutingPlan& plan = h.act.plan;
  // The rows are a permutation of the N·k slots, each inside its expert's run, holding its token.
  std::vector<int> seen(static_cast<std::size_t>(N * K), 0);
  for (std::int64_t s = 0; s < N * K; ++s) {
    const std::int64_t row = plan.row[static_cast<std::size_t>(s)];
    const int e = plan.expert[static_cast<std::size_t>(s)];
    ++seen[static_cast<std::size_t>(row)];
    CHECK((plan.offsets[e] <= row && row < plan.offsets[e + 1]));
    for (std::int64_t c = 0; c < C; ++c)
      CHECK(h.act.grouped_in.data_as<double>()[row * C + c] == x.data_as<double>()[(s / K) * C + c]);
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; }));
  CHECK(plan.offsets[E] == N * K);
  // out_t against each token's chosen experts run on that token alone.
  auto mlp = [](const double* xt, const double* fw, const double* fb, const double* pw, const double* pb, double* yt,
                double weight) {
    for (std::int64_t c = 0; c < C; ++c) {
      double y = pb[c];
      for (std::int64_t m = 0; m < H; ++m) {
        double hm = fb[m];
        for (std::int64_t i = 0; i < C; ++i) hm += fw[m * C + i] * xt[i];
        const double gelu = 0.5 * hm * (1 + std::tanh(std::sqrt(2 / M_PI) * (hm + 0.044715 * hm * hm * hm)));
        y += pw[c * H + m] * gelu;
      }
      yt[c] += weight * y;
    }
  };
  double diff = 0;
  for (std::int64_t t = 0; t < N; ++t) {
    std::vector<double> y(static_cast<std::size_t>(C), 0.0);
    const double* xt = x.data_as<double>() + t * C;
    for (int j = 0; j < K; ++j) {
      const int e = plan.expert[static_cast<std::size_t>(t * K + j)];
      mlp(xt, w.fc_w.data_as<double>() + e * H * C, w.fc_b.data_as<double>() + e * H,
          w.proj_w.data_as<double>() + e * C * H, w.proj_b.data_as<double>() + e * C, y.data(),
          h.act.gates.data_as<double>()[t * K + j]);
    }
    mlp(xt, w.shared_fc_w.data_as<double>(), w.shared_fc_b.data_as<double>(), w.shared_proj_w.data_as<double>(),
        w.shared_proj_b.data_as<double>(), y.data(), 1.0);
    for (std::int64_t c = 0; c < C; ++c)
      diff = std::max(diff, std::abs(y[static_cast<std::size_t>(c)] - h.out.data_as<double>()[t * C + c]));
  }
  CHECK(diff < 1e-12);
}

TEST_CASE("moe layer: an expert that receives no tokens has zero gradients and the rest still match", "[gradcheck]") {
  std::mt19937 rng(51);
  Harness h(false, DType::f64, rng);
  Tensor x = normal_tensor({N, C}, rng, 1.0);
  MoEWeights w = random_weights(rng, false);
  // Channel 0 is 1 for every token and the last expert's router row reads it as -20: never chosen.
  for (std::int64_t t = 0; t < N; ++t) x.data_as<double>()[t * C] = 1.0;
  for (std::int64_t c = 0; c < C; ++c) w.router.data_as<double>()[(E - 1) * C + c] = c == 0 ? -20.0 : 0.0;
  auto loss = [&] { return h.loss(x, w); };
  loss();
  REQUIRE(h.act.plan.count(E - 1) == 0);
  REQUIRE(smallest_choice_margin(h.act) > 1e-2);
  MoEWeights g = zeros_like(w);
  MoEScratch scratch = make_moe_scratch(shape(false), N, allocator(DType::f64));
  Tensor dx = Tensor::zeros({N, C}, DType::f64);
  moe_backward(h.backend, dx, g, scratch, h.R, h.act, x, w, aux_coef, z_coef);
  const Tensor idle_fc = g.fc_w.slice((E - 1) * H * C, {H, C}), idle_proj = g.proj_w.slice((E - 1) * C * H, {C, H});
  for (std::int64_t i = 0; i < H * C; ++i) {
    CHECK(idle_fc.data_as<double>()[i] == 0.0);
    CHECK(idle_proj.data_as<double>()[i] == 0.0);
  }
  check_gradient("x", x, dx, loss);
  check_gradient("router", w.router, g.router, loss);
  check_gradient("fc_w", w.fc_w, g.fc_w, loss);
  check_gradient("proj_b", w.proj_b, g.proj_b, loss);
}

TEST_CASE("moe layer: f32 forward and backward agree with f64") {
  std::mt19937 rng(61);
  const Tensor x = normal_tensor({N, C}, rng, 1.0);
  MoEWeights w = random_weights(rng, true);
  auto run = [&](DType dtype, Tensor& out, Tensor& dx, MoEWeights& g) {
    CpuBackend backend(1);
    MoEWeights wd = w;
    for (Tensor* t : {&wd.router, &wd.fc_w, &wd.fc_b, &wd.proj_w, &wd.proj_b, &wd.shared_fc_w, &wd.shared_fc_b,
                      &wd.shared_proj_w, &wd.shared_proj_b})
      *t = as(*t, dtype);
    MoEActivations a = make_moe_activations(shape(), N, allocator(dtype));
    MoEScratch m = make_moe_scratch(shape(), N, allocator(dtype));
    const Tensor xd = as(x, dtype);
    out = Tensor::zeros({N, C}, dtype);
    dx = Tensor::zeros({N, C}, dtype);
    g = zeros_like(wd);
    moe_forward(backend, out, a, xd, wd, K);
    Tensor ones = Tensor::zeros({N, C}, dtype);
    for (std::int64_t i = 0; i < N * C; ++i)
      dtype == DType::f64 ? void(ones.data_as<double>()[i] = 1) : void(ones.data_as<float>()[i] = 1);
    moe_backward(backend, dx, g, m, ones, a, xd, wd, aux_coef, z_coef);
  };
  Tensor out64, dx64, out32, dx32;
  MoEWeights g64, g32;
  run(DType::f64, out64, dx64, g64);
  run(DType::f32, out32, dx32, g32);
  auto close = [](const Tensor& a32, const Tensor& a64) {
    const Tensor b = as(a32, DType::f64);
    double diff = 0, norm = 0;
    for (std::int64_t i = 0; i < a64.numel(); ++i) {
      diff += std::pow(b.data_as<double>()[i] - a64.data_as<double>()[i], 2);
      norm += std::pow(a64.data_as<double>()[i], 2);
    }
    return std::sqrt(diff) <= 1e-5 * std::sqrt(norm) && norm > 0;
  };
  CHECK(close(out32, out64));
  CHECK(close(dx32, dx64));
  CHECK(close(g32.router, g64.router));
  CHECK(close(g32.fc_w, g64.fc_w));
  CHECK(close(g32.shared_proj_w, g64.shared_proj_w));
}
