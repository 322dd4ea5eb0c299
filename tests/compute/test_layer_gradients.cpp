// Every layer's backward against central finite differences of its forward, in float64 through
// the CpuBackend. With a fixed random R, the scalar loss is L = sum(out * R), so backward gets
// dout = R; each element of each input and parameter gradient is compared with the quotient of
// support/finite_difference.hpp, which also says why the check is |numeric - analytic| <= atol +
// rtol |numeric|. Run with -s to see the worst share of that allowance per (layer, tensor).
// Activation gradients and scratch start as NaN, so a backward that reads instead of overwriting
// them fails here too.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "compute/cpu/cpu_backend.hpp"
#include "support/finite_difference.hpp"
#include "support/random_tensor.hpp"

using namespace troupe::compute;
using troupe::test::central_difference;
using troupe::test::GradientTolerance;
using troupe::test::rounding_unit;

namespace {

using troupe::test::normal_tensor;

// h = 1e-4 keeps the fourth-order truncation (h^4 times a fifth derivative of these smooth,
// O(1)-scaled layers) under the rounding unit ulp(S)/h, S the loss's magnitude (below), which is
// 2e-11 to 6e-10 here.
constexpr double fd_step = 1e-4;
// atol, in rounding units: each evaluated loss may be off by about 10 ulp of S (1.5 units per
// ulp, support/finite_difference.hpp); measured at most 1.2 units here (crossentropy).
constexpr double atol_units = 16;
// rtol: the error that scales with the gradient is the steps x +- h not being exactly h apart in
// floating point, ulp(x)/2h relative, about 1e-11 for these inputs; 1e-9 leaves it room. The
// smallest error found is then set by atol: 0.1 % of any element larger than 1000 atol (3e-7 to
// 9e-6 here, against gradients of order 1).
constexpr double rtol = 1e-9;

// Small shapes: B=2 sequences of T=5 positions, C=8 channels in NH=2 heads, vocabulary V=7
// padded to Vp=8, positions table for maxT=6.
constexpr int B = 2, T = 5, C = 8, NH = 2, V = 7, Vp = 8, max_T = 6;

Tensor nan_tensor(Shape shape) {
  Tensor t = Tensor::zeros(std::move(shape), DType::f64);
  double* p = t.data_as<double>();
  for (std::int64_t i = 0; i < t.numel(); ++i) p[i] = std::numeric_limits<double>::quiet_NaN();
  return t;
}

Tensor ids_tensor(Shape shape, const std::vector<std::int32_t>& ids) {
  Tensor t = Tensor::zeros(std::move(shape), DType::i32);
  REQUIRE(static_cast<std::size_t>(t.numel()) == ids.size());
  for (std::size_t i = 0; i < ids.size(); ++i) t.data_as<std::int32_t>()[i] = ids[i];
  return t;
}

double dot(const Tensor& a, const Tensor& b) {
  double s = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) s += a.data_as<double>()[i] * b.data_as<double>()[i];
  return s;
}

double norm(const Tensor& a) { return std::sqrt(dot(a, a)); }

// A loss evaluation: its value, and the magnitude S its rounding scales with. For sum(out * R)
// the terms cancel, so S is sum |out * R|, not |L|: the sum's rounding is of the size of its
// terms and partial sums, whatever it adds up to.
struct Loss {
  double value = 0;
  double magnitude = 0;
};

Loss weighted_sum(const Tensor& out, const Tensor& R) {
  Loss l;
  for (std::int64_t i = 0; i < out.numel(); ++i) {
    const double term = out.data_as<double>()[i] * R.data_as<double>()[i];
    l.value += term;
    l.magnitude += std::abs(term);
  }
  return l;
}

struct NumericGradient {
  Tensor values;
  double rounding_unit = 0;  // ulp(S)/h at x
};

// The difference quotient of loss() for every element of x (x is restored).
NumericGradient numeric_gradient(Tensor& x, const std::function<Loss()>& loss) {
  NumericGradient g{Tensor::zeros(x.shape(), DType::f64), rounding_unit(loss().magnitude, fd_step)};
  double* p = x.data_as<double>();
  for (std::int64_t i = 0; i < x.numel(); ++i)
    g.values.data_as<double>()[i] = central_difference(p[i], fd_step, [&] { return loss().value; });
  return g;
}

void check_gradient(const std::string& layer, const std::string& tensor, const Tensor& analytic,
                    const NumericGradient& numeric) {
  REQUIRE(analytic.shape() == numeric.values.shape());
  const GradientTolerance tolerance{atol_units * numeric.rounding_unit, rtol};
  double worst = 0, largest = 0;
  std::int64_t worst_at = 0;
  for (std::int64_t i = 0; i < analytic.numel(); ++i) {
    const double n = numeric.values.data_as<double>()[i];
    const double used = tolerance.used(n, analytic.data_as<double>()[i]);
    if (used > worst) worst = used, worst_at = i;
    largest = std::max(largest, std::abs(n));
  }
  INFO(layer << "  d" << tensor << "  worst share of the tolerance " << worst << " at element " << worst_at
             << ": analytic " << analytic.data_as<double>()[worst_at] << ", numeric "
             << numeric.values.data_as<double>()[worst_at] << "  (atol " << tolerance.atol << ", rtol "
             << tolerance.rtol << ")");
  CHECK(worst <= 1.0);
  // Not vacuous: somewhere in the tensor a 0.1 % error would exceed the tolerance.
  CHECK(largest * 1e-3 > tolerance.atol + tolerance.rtol * largest);
}

Tensor scaled(const Tensor& t, double factor) {
  Tensor out = Tensor::zeros(t.shape(), DType::f64);
  for (std::int64_t i = 0; i < t.numel(); ++i) out.data_as<double>()[i] = factor * t.data_as<double>()[i];
  return out;
}

void check_close(const std::string& what, const Tensor& actual, const Tensor& expected) {
  double diff = 0;
  bool finite = true;
  for (std::int64_t i = 0; i < actual.numel(); ++i) {
    finite = finite && std::isfinite(actual.data_as<double>()[i]);
    diff = std::max(diff, std::abs(actual.data_as<double>()[i] - expected.data_as<double>()[i]));
  }
  INFO(what << ": max difference " << diff << " against |expected| " << norm(expected));
  CHECK(finite);
  CHECK(norm(expected) > 0);
  CHECK(diff <= 1e-12 * std::max(1.0, norm(expected)));
}

Tensor copy_of(const Tensor& t) {
  Tensor c = Tensor::zeros(t.shape(), t.dtype());
  std::copy_n(t.data_as<char>(), t.nbytes(), c.data_as<char>());
  return c;
}

}  // namespace

TEST_CASE("encoder backward matches finite differences", "[gradcheck]") {
  CpuBackend backend(1);
  std::mt19937 rng(11);
  // Token 1 appears three times and token 2 twice: their wte rows must sum every occurrence.
  const Tensor tokens = ids_tensor({B, T}, {1, 3, 1, 0, 6, 2, 2, 7, 1, 5});
  Tensor wte = normal_tensor({Vp, C}, rng);
  Tensor wpe = normal_tensor({max_T, C}, rng);
  const Tensor R = normal_tensor({B, T, C}, rng);
  Tensor out = Tensor::zeros({B, T, C}, DType::f64);
  auto loss = [&] {
    backend.encoder_forward(out, tokens, wte, wpe);
    return weighted_sum(out, R);
  };
  Tensor dwte = Tensor::zeros(wte.shape(), DType::f64);
  Tensor dwpe = Tensor::zeros(wpe.shape(), DType::f64);
  backend.encoder_backward(dwte, dwpe, R, tokens);
  check_gradient("encoder", "wte", dwte, numeric_gradient(wte, loss));
  check_gradient("encoder", "wpe", dwpe, numeric_gradient(wpe, loss));
}

TEST_CASE("layernorm backward matches finite differences", "[gradcheck]") {
  CpuBackend backend(1);
  std::mt19937 rng(12);
  Tensor inp = normal_tensor({B, T, C}, rng, 2.0, 0.5);
  Tensor weight = normal_tensor({C}, rng, 0.3, 1.0);
  Tensor bias = normal_tensor({C}, rng, 0.3);
  const Tensor R = normal_tensor({B, T, C}, rng);
  Tensor out = Tensor::zeros({B, T, C}, DType::f64);
  Tensor mean = Tensor::zeros({B, T}, DType::f64);
  Tensor rstd = Tensor::zeros({B, T}, DType::f64);
  auto loss = [&] {
    backend.layernorm_forward(out, mean, rstd, inp, weight, bias);
    return weighted_sum(out, R);
  };
  loss();
  Tensor dinp = Tensor::zeros(inp.shape(), DType::f64);
  Tensor dweight = Tensor::zeros(weight.shape(), DType::f64);
  Tensor dbias = Tensor::zeros(bias.shape(), DType::f64);
  backend.layernorm_backward(dinp, dweight, dbias, R, inp, weight, mean, rstd);
  check_gradient("layernorm", "inp", dinp, numeric_gradient(inp, loss));
  check_gradient("layernorm", "weight", dweight, numeric_gradient(weight, loss));
  check_gradient("layernorm", "bias", dbias, numeric_gradient(bias, loss));
}

TEST_CASE("matmul backward matches finite differences, with and without bias", "[gradcheck]") {
  CpuBackend backend(1);
  std::mt19937 rng(13);
  constexpr int OC = 12;
  const bool with_bias = GENERATE(true, false);
  const std::string layer = with_bias ? "matmul+bias" : "matmul";
  Tensor inp = normal_tensor({B, T, C}, rng);
  Tensor weight = normal_tensor({OC, C}, rng, 0.5);
  Tensor bias = with_bias ? normal_tensor({OC}, rng) : Tensor();
  const Tensor R = normal_tensor({B, T, OC}, rng);
  Tensor out = Tensor::zeros({B, T, OC}, DType::f64);
  auto loss = [&] {
    backend.matmul_forward(out, inp, weight, bias);
    return weighted_sum(out, R);
  };
  Tensor dinp = nan_tensor(inp.shape());
  Tensor dweight = Tensor::zeros(weight.shape(), DType::f64);
  Tensor dbias = with_bias ? Tensor::zeros({OC}, DType::f64) : Tensor();
  backend.matmul_backward(dinp, dweight, dbias, R, inp, weight);
  check_gradient(layer, "inp", dinp, numeric_gradient(inp, loss));
  check_gradient(layer, "weight", dweight, numeric_gradient(weight, loss));
  if (with_bias) check_gradient(layer, "bias", dbias, numeric_gradient(bias, loss));
}

TEST_CASE("attention backward matches finite differences", "[gradcheck]") {
  CpuBackend backend(1);
  std::mt19937 rng(14);
  // T = 67 spans a full query block of 64 and a partial one, so the block-accumulated dk and dv
  // are checked too.
  struct Case {
    int b, t;
  };
  const Case shape = GENERATE(Case{B, T}, Case{1, 67});
  const std::string layer = "attention T=" + std::to_string(shape.t);
  Tensor qkv = normal_tensor({shape.b, shape.t, 3 * C}, rng);
  const Tensor R = normal_tensor({shape.b, shape.t, C}, rng);
  Tensor out = Tensor::zeros({shape.b, shape.t, C}, DType::f64);
  Tensor att = Tensor::zeros(backend.attention_state_shape(shape.b, NH, shape.t), DType::f64);
  auto loss = [&] {
    backend.attention_forward(out, att, qkv, NH);
    return weighted_sum(out, R);
  };
  loss();
  Tensor dqkv = nan_tensor(qkv.shape());
  Tensor datt = nan_tensor(att.shape());
  backend.attention_backward(dqkv, datt, R, qkv, att, NH);
  check_gradient(layer, "qkv", dqkv, numeric_gradient(qkv, loss));
}

TEST_CASE("gelu backward matches finite differences", "[gradcheck]") {
  CpuBackend backend(1);
  std::mt19937 rng(15);
  Tensor inp = normal_tensor({B, T, 4 * C}, rng, 2.0);
  const Tensor R = normal_tensor({B, T, 4 * C}, rng);
  Tensor out = Tensor::zeros(inp.shape(), DType::f64);
  auto loss = [&] {
    backend.gelu_forward(out, inp);
    return weighted_sum(out, R);
  };
  Tensor dinp = nan_tensor(inp.shape());
  backend.gelu_backward(dinp, inp, R);
  check_gradient("gelu", "inp", dinp, numeric_gradient(inp, loss));
}

TEST_CASE("residual forward passes dout to both inputs", "[gradcheck]") {
  // The backend has no residual_backward: the model hands dout to both branches itself. What
  // is checked is that the forward is the sum, whose gradient for each input is dout = R.
  CpuBackend backend(1);
  std::mt19937 rng(16);
  Tensor a = normal_tensor({B, T, C}, rng);
  Tensor b = normal_tensor({B, T, C}, rng);
  const Tensor R = normal_tensor({B, T, C}, rng);
  Tensor out = Tensor::zeros({B, T, C}, DType::f64);
  auto loss = [&] {
    backend.residual_forward(out, a, b);
    return weighted_sum(out, R);
  };
  check_gradient("residual", "a", R, numeric_gradient(a, loss));
  check_gradient("residual", "b", R, numeric_gradient(b, loss));
}

TEST_CASE("crossentropy backward matches finite differences", "[gradcheck]") {
  CpuBackend backend(1);
  std::mt19937 rng(17);
  Tensor logits = normal_tensor({B, T, Vp}, rng, 2.0);
  const Tensor targets = ids_tensor({B, T}, {0, 6, 3, 3, 1, 5, 2, 6, 4, 0});
  // backward takes one dloss for every position, so the weights of L = sum(losses * w) are equal.
  const float dloss = 0.37f;
  Tensor losses = Tensor::zeros({B, T}, DType::f64);
  Tensor probs = Tensor::zeros({B, T, Vp}, DType::f64);
  auto loss = [&] {
    backend.crossentropy_forward(losses, probs, logits, targets, V);
    double sum = 0;
    for (std::int64_t i = 0; i < losses.numel(); ++i) sum += losses.data_as<double>()[i];
    const double value = static_cast<double>(dloss) * sum;
    return Loss{value, value};  // cross-entropies are positive: nothing cancels
  };
  loss();
  Tensor dlogits = nan_tensor(logits.shape());
  backend.crossentropy_backward(dlogits, probs, targets, dloss);
  const NumericGradient numeric = numeric_gradient(logits, loss);
  check_gradient("crossentropy", "logits", dlogits, numeric);
  for (int row = 0; row < B * T; ++row) {
    INFO("row " << row << ", padded column " << V);
    CHECK(dlogits.data_as<double>()[row * Vp + V] == 0.0);
    CHECK(numeric.values.data_as<double>()[row * Vp + V] == 0.0);
  }
}

TEST_CASE("backward accumulates parameter gradients and overwrites activation gradients", "[gradcheck]") {
  CpuBackend backend(1);
  std::mt19937 rng(18);
  constexpr int OC = 12;

  SECTION("matmul: dweight and dbias +=, dinp =") {
    const Tensor inp = normal_tensor({B, T, C}, rng);
    const Tensor weight = normal_tensor({OC, C}, rng);
    const Tensor dout = normal_tensor({B, T, OC}, rng);
    Tensor dinp = nan_tensor(inp.shape());
    Tensor dweight = Tensor::zeros(weight.shape(), DType::f64);
    Tensor dbias = Tensor::zeros({OC}, DType::f64);
    backend.matmul_backward(dinp, dweight, dbias, dout, inp, weight);
    const Tensor dinp1 = copy_of(dinp), dweight1 = copy_of(dweight), dbias1 = copy_of(dbias);
    backend.matmul_backward(dinp, dweight, dbias, dout, inp, weight);
    check_close("matmul dinp after two calls", dinp, dinp1);
    check_close("matmul dweight after two calls", dweight, scaled(dweight1, 2));
    check_close("matmul dbias after two calls", dbias, scaled(dbias1, 2));
  }
  SECTION("layernorm: dinp, dweight and dbias +=") {
    const Tensor inp = normal_tensor({B, T, C}, rng);
    const Tensor weight = normal_tensor({C}, rng, 0.3, 1.0);
    const Tensor bias = normal_tensor({C}, rng);
    const Tensor dout = normal_tensor({B, T, C}, rng);
    Tensor out = Tensor::zeros(inp.shape(), DType::f64);
    Tensor mean = Tensor::zeros({B, T}, DType::f64);
    Tensor rstd = Tensor::zeros({B, T}, DType::f64);
    backend.layernorm_forward(out, mean, rstd, inp, weight, bias);
    // dinp starts with a residual gradient already in it, as it does in the model.
    const Tensor residual = normal_tensor(inp.shape(), rng);
    Tensor dinp = copy_of(residual);
    Tensor dweight = Tensor::zeros({C}, DType::f64);
    Tensor dbias = Tensor::zeros({C}, DType::f64);
    backend.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd);
    Tensor own = copy_of(dinp);
    for (std::int64_t i = 0; i < own.numel(); ++i) own.data_as<double>()[i] -= residual.data_as<double>()[i];
    const Tensor dweight1 = copy_of(dweight), dbias1 = copy_of(dbias);
    backend.layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd);
    Tensor expected = copy_of(residual);
    for (std::int64_t i = 0; i < own.numel(); ++i) expected.data_as<double>()[i] += 2 * own.data_as<double>()[i];
    check_close("layernorm dinp after two calls", dinp, expected);
    check_close("layernorm dweight after two calls", dweight, scaled(dweight1, 2));
    check_close("layernorm dbias after two calls", dbias, scaled(dbias1, 2));
  }
  SECTION("encoder: dwte and dwpe +=") {
    const Tensor tokens = ids_tensor({B, T}, {1, 3, 1, 0, 6, 2, 2, 7, 1, 5});
    const Tensor dout = normal_tensor({B, T, C}, rng);
    Tensor dwte = Tensor::zeros({Vp, C}, DType::f64);
    Tensor dwpe = Tensor::zeros({max_T, C}, DType::f64);
    backend.encoder_backward(dwte, dwpe, dout, tokens);
    const Tensor dwte1 = copy_of(dwte), dwpe1 = copy_of(dwpe);
    backend.encoder_backward(dwte, dwpe, dout, tokens);
    check_close("encoder dwte after two calls", dwte, scaled(dwte1, 2));
    check_close("encoder dwpe after two calls", dwpe, scaled(dwpe1, 2));
  }
  SECTION("attention, gelu and crossentropy: activation gradients =") {
    const Tensor qkv = normal_tensor({B, T, 3 * C}, rng);
    const Tensor dout = normal_tensor({B, T, C}, rng);
    Tensor out = Tensor::zeros({B, T, C}, DType::f64);
    Tensor att = Tensor::zeros(backend.attention_state_shape(B, NH, T), DType::f64);
    backend.attention_forward(out, att, qkv, NH);
    Tensor dqkv = nan_tensor(qkv.shape());
    Tensor datt = nan_tensor(att.shape());
    backend.attention_backward(dqkv, datt, dout, qkv, att, NH);
    const Tensor dqkv1 = copy_of(dqkv);
    backend.attention_backward(dqkv, datt, dout, qkv, att, NH);
    check_close("attention dqkv after two calls", dqkv, dqkv1);

    const Tensor inp = normal_tensor({B, T, C}, rng);
    Tensor dinp = nan_tensor(inp.shape());
    backend.gelu_backward(dinp, inp, dout);
    const Tensor dinp1 = copy_of(dinp);
    backend.gelu_backward(dinp, inp, dout);
    check_close("gelu dinp after two calls", dinp, dinp1);

    const Tensor logits = normal_tensor({B, T, Vp}, rng);
    const Tensor targets = ids_tensor({B, T}, {0, 6, 3, 3, 1, 5, 2, 6, 4, 0});
    Tensor losses = Tensor::zeros({B, T}, DType::f64);
    Tensor probs = Tensor::zeros({B, T, Vp}, DType::f64);
    backend.crossentropy_forward(losses, probs, logits, targets, V);
    Tensor dlogits = nan_tensor(logits.shape());
    backend.crossentropy_backward(dlogits, probs, targets, 0.5f);
    const Tensor dlogits1 = copy_of(dlogits);
    backend.crossentropy_backward(dlogits, probs, targets, 0.5f);
    check_close("crossentropy dlogits after two calls", dlogits, dlogits1);
  }
}
