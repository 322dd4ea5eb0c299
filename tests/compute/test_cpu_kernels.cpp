// The CPU kernels beyond their gradients: forwards (and attention's backward) against direct
// float64 loops, float32 against float64 at medium shapes (T = 67 is no multiple of any block or
// vector width) and at the "small" model's attention shape, causality and the padded-vocabulary
// zeros, AdamW against a hand computation (its segment lists: test_adamw_segments.cpp), the
// accuracy of the vectorized exp and sqrt, bitwise determinism, and the checks that make a wrong
// call fail loudly.

#include <cblas.h>
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <numbers>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/cpu/openblas_setup.hpp"
#include "compute/cpu/vector_math.hpp"
#include "support/random_tensor.hpp"
#include "support/tensor_compare.hpp"

using namespace troupe::compute;
using troupe::test::bitwise_equal;

namespace {

using troupe::test::normal_tensor;

Tensor random_ids(Shape shape, std::mt19937& rng, int limit) {
  Tensor t = Tensor::zeros(std::move(shape), DType::i32);
  std::uniform_int_distribution<int> dist(0, limit - 1);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data_as<std::int32_t>()[i] = dist(rng);
  return t;
}

// A copy of an f64 master tensor in `dtype` (f32 or f64).
Tensor as(const Tensor& master, DType dtype) {
  Tensor t = Tensor::zeros(master.shape(), dtype);
  for (std::int64_t i = 0; i < master.numel(); ++i) {
    const double x = master.data_as<double>()[i];
    if (dtype == DType::f32) {
      t.data_as<float>()[i] = static_cast<float>(x);
    } else {
      t.data_as<double>()[i] = x;
    }
  }
  return t;
}

double at(const Tensor& t, std::int64_t i) {
  return t.dtype() == DType::f32 ? t.data_as<float>()[i] : t.data_as<double>()[i];
}

Tensor filled(Shape shape, DType dtype, double value) {
  Tensor t = Tensor::zeros(std::move(shape), dtype);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::f32) {
      t.data_as<float>()[i] = static_cast<float>(value);
    } else {
      t.data_as<double>()[i] = value;
    }
  }
  return t;
}

Tensor nans(Shape shape, DType dtype) {
  return filled(std::move(shape), dtype, std::numeric_limits<double>::quiet_NaN());
}

// |a - b| / |b| over the whole tensor; NaN anywhere makes it NaN (and every check fail).
double relative_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.numel() == b.numel());
  double diff = 0, ref = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    const double d = at(a, i) - at(b, i);
    if (std::isnan(d)) return d;
    diff += d * d;
    ref += at(b, i) * at(b, i);
  }
  return std::sqrt(diff) / std::max(std::sqrt(ref), 1e-300);
}

// The outputs of one scenario, run once per dtype from the same f64 inputs.
using Scenario = std::function<std::vector<std::pair<std::string, Tensor>>(DType)>;

void check_f32_matches_f64(const Scenario& scenario, double tolerance) {
  const auto f64 = scenario(DType::f64);
  const auto f32 = scenario(DType::f32);
  REQUIRE(f64.size() == f32.size());
  for (std::size_t i = 0; i < f64.size(); ++i) {
    const double rel = relative_difference(f32[i].second, f64[i].second);
    INFO(f64[i].first << ": f32 vs f64 relative difference " << rel);
    CHECK(rel < tolerance);
  }
}

// Direct float64 causal attention, one (b, h, i) at a time: the output, each query row's
// log-sum-exp of its scaled scores (the cpu backend's attention state), and dqkv for dout.
struct AttentionReference {
  std::vector<double> out, lse, dqkv;
};

AttentionReference reference_attention(const Tensor& qkv, const Tensor& dout, int NH) {
  const int B = static_cast<int>(qkv.dim(0)), T = static_cast<int>(qkv.dim(1)), C = static_cast<int>(qkv.dim(2) / 3);
  const int hs = C / NH;
  const double scale = 1 / std::sqrt(static_cast<double>(hs));
  const double* x = qkv.data_as<double>();
  const double* dy = dout.data_as<double>();
  AttentionReference r;
  r.out.assign(static_cast<std::size_t>(B) * T * C, 0.0);
  r.lse.assign(static_cast<std::size_t>(B) * NH * T, 0.0);
  r.dqkv.assign(static_cast<std::size_t>(B) * T * 3 * C, 0.0);
  auto row = [&](int b, int t) { return (static_cast<std::size_t>(b) * T + t) * 3 * C; };
  std::vector<double> p(T), dp(T);
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      for (int i = 0; i < T; ++i) {
        const double* q = x + row(b, i) + h * hs;
        double max = -std::numeric_limits<double>::infinity();
        for (int j = 0; j <= i; ++j) {
          const double* k = x + row(b, j) + C + h * hs;
          double s = 0;
          for (int c = 0; c < hs; ++c) s += q[c] * k[c];
          p[j] = s * scale;
          max = std::max(max, p[j]);
        }
        double sum = 0;
        for (int j = 0; j <= i; ++j) sum += p[j] = std::exp(p[j] - max);
        for (int j = 0; j <= i; ++j) p[j] /= sum;
        r.lse[(static_cast<std::size_t>(b) * NH + h) * T + i] = max + std::log(sum);
        double* o = r.out.data() + (static_cast<std::size_t>(b) * T + i) * C + h * hs;
        const double* d = dy + (static_cast<std::size_t>(b) * T + i) * C + h * hs;
        double row_dot = 0;
        for (int j = 0; j <= i; ++j) {
          const double* v = x + row(b, j) + 2 * C + h * hs;
          double* dv = r.dqkv.data() + row(b, j) + 2 * C + h * hs;
          dp[j] = 0;
          for (int c = 0; c < hs; ++c) {
            o[c] += p[j] * v[c];
            dv[c] += p[j] * d[c];
            dp[j] += d[c] * v[c];
          }
          row_dot += p[j] * dp[j];
        }
        double* dq = r.dqkv.data() + row(b, i) + h * hs;
        for (int j = 0; j <= i; ++j) {
          const double ds = p[j] * (dp[j] - row_dot) * scale;
          const double* k = x + row(b, j) + C + h * hs;
          double* dk = r.dqkv.data() + row(b, j) + C + h * hs;
          for (int c = 0; c < hs; ++c) {
            dq[c] += ds * k[c];
            dk[c] += ds * q[c];
          }
        }
      }
    }
  }
  return r;
}

double max_abs_difference(const Tensor& t, const std::vector<double>& expected) {
  double diff = 0;
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double d = std::abs(at(t, i) - expected[static_cast<std::size_t>(i)]);
    if (std::isnan(d)) return d;
    diff = std::max(diff, d);
  }
  return diff;
}

const double sqrt_2_over_pi = std::sqrt(2 / std::numbers::pi);

double gelu_reference(double x) { return 0.5 * x * (1 + std::tanh(sqrt_2_over_pi * (x + 0.044715 * x * x * x))); }

double gelu_derivative_reference(double x) {
  const double u = sqrt_2_over_pi * (x + 0.044715 * x * x * x);
  const double du = sqrt_2_over_pi * (1 + 3 * 0.044715 * x * x);
  const double th = std::tanh(u);
  return 0.5 * (1 + th) + 0.5 * x * (1 - th * th) * du;
}

// The library compiles its loops with these clones; the test compiles vexp and vsqrt the same
// way so it checks the code paths this machine runs.
TROUPE_SIMD_CLONES void apply_vexp(float* y, const float* x, int n) {
  for (int i = 0; i < n; ++i) y[i] = troupe::compute::cpu::vexp(x[i]);
}
TROUPE_SIMD_CLONES void apply_vsqrt(float* y, const float* x, int n) {
  for (int i = 0; i < n; ++i) y[i] = troupe::compute::cpu::vsqrt(x[i]);
}

}  // namespace

TEST_CASE("layer forwards match direct float64 loops", "[kernels]") {
  CpuBackend backend(1);
  std::mt19937 rng(21);
  constexpr int B = 2, T = 67, C = 96, NH = 3, OC = 40, V = 100, Vp = 128;

  SECTION(
      "attention and its backward, at T = 67 (a full query block and a partial one), T = 5, and T = 1100 (rows "
      "longer than one key chunk of 1024, so online softmax and the two-pass backward)") {
    struct Case {
      int b, t, c, nh;
    };
    const Case s = GENERATE(Case{B, 67, C, NH}, Case{B, 5, C, NH}, Case{1, 1100, 32, 2});
    const Tensor qkv = normal_tensor({s.b, s.t, 3 * s.c}, rng);
    const Tensor dout = normal_tensor({s.b, s.t, s.c}, rng);
    Tensor out = nans({s.b, s.t, s.c}, DType::f64);
    Tensor att = nans(backend.attention_state_shape(s.b, s.nh, s.t), DType::f64);
    backend.attention_forward(out, att, qkv, s.nh);
    Tensor dqkv = nans(qkv.shape(), DType::f64);
    Tensor datt = nans(att.shape(), DType::f64);
    backend.attention_backward(dqkv, datt, dout, qkv, att, s.nh);
    const AttentionReference ref = reference_attention(qkv, dout, s.nh);
    INFO("T = " << s.t);
    CHECK(max_abs_difference(out, ref.out) < 1e-12);
    CHECK(max_abs_difference(att, ref.lse) < 1e-12);
    CHECK(max_abs_difference(dqkv, ref.dqkv) < 1e-10);
  }
  SECTION("matmul with and without bias") {
    const Tensor inp = normal_tensor({B, T, C}, rng);
    const Tensor weight = normal_tensor({OC, C}, rng);
    const Tensor bias = normal_tensor({OC}, rng);
    for (bool with_bias : {true, false}) {
      Tensor out = nans({B, T, OC}, DType::f64);
      backend.matmul_forward(out, inp, weight, with_bias ? bias : Tensor());
      std::vector<double> expected(static_cast<std::size_t>(B) * T * OC);
      for (int r = 0; r < B * T; ++r) {
        for (int o = 0; o < OC; ++o) {
          double s = with_bias ? bias.data_as<double>()[o] : 0.0;
          for (int c = 0; c < C; ++c) s += inp.data_as<double>()[r * C + c] * weight.data_as<double>()[o * C + c];
          expected[static_cast<std::size_t>(r) * OC + o] = s;
        }
      }
      INFO("bias: " << with_bias);
      CHECK(max_abs_difference(out, expected) < 1e-12);

      // The same product added onto a residual stream, fused and as the Backend's default (the
      // matmul into out, then the residual added in place), which other backends inherit.
      const Tensor residual = normal_tensor({B, T, OC}, rng);
      for (std::size_t i = 0; i < expected.size(); ++i) expected[i] += residual.data_as<double>()[i];
      Tensor fused = nans({B, T, OC}, DType::f64), composed = nans({B, T, OC}, DType::f64);
      backend.matmul_residual_forward(fused, inp, weight, with_bias ? bias : Tensor(), residual);
      backend.Backend::matmul_residual_forward(composed, inp, weight, with_bias ? bias : Tensor(), residual);
      CHECK(max_abs_difference(fused, expected) < 1e-12);
      CHECK(max_abs_difference(composed, expected) < 1e-12);
    }
  }
  SECTION(
      "matmul whose starting rows go out through streaming stores (2 MiB and more), 259 columns so rows start "
      "off every vector boundary") {
    constexpr int rows = 2048, width = 259, depth = 24;
    const Tensor inp = normal_tensor({rows, depth}, rng);
    const Tensor weight = normal_tensor({width, depth}, rng);
    const Tensor bias = normal_tensor({width}, rng);
    const Tensor residual = normal_tensor({rows, width}, rng);
    for (const DType dtype : {DType::f64, DType::f32}) {
      for (const bool with_residual : {false, true}) {
        for (const bool with_bias : {false, true}) {
          if (!with_residual && !with_bias) continue;
          std::vector<double> expected(static_cast<std::size_t>(rows) * width);
          const Tensor x = as(inp, dtype), w = as(weight, dtype), b = as(bias, dtype), r = as(residual, dtype);
          for (int i = 0; i < rows; ++i) {
            for (int o = 0; o < width; ++o) {
              double s = (with_bias ? at(b, o) : 0.0) + (with_residual ? at(r, i * width + o) : 0.0);
              for (int c = 0; c < depth; ++c) s += at(x, i * depth + c) * at(w, o * depth + c);
              expected[static_cast<std::size_t>(i) * width + o] = s;
            }
          }
          Tensor out = nans({rows, width}, dtype);
          if (with_residual)
            backend.matmul_residual_forward(out, x, w, with_bias ? b : Tensor(), r);
          else
            backend.matmul_forward(out, x, w, b);
          INFO(dtype_name(dtype) << ", residual " << with_residual << ", bias " << with_bias);
          CHECK(max_abs_difference(out, expected) < (dtype == DType::f64 ? 1e-12 : 1e-4));
        }
      }
    }
  }
  SECTION("layernorm, eps 1e-5 and biased variance") {
    const Tensor inp = normal_tensor({B, T, C}, rng, 3.0, 2.0);
    const Tensor weight = normal_tensor({C}, rng);
    const Tensor bias = normal_tensor({C}, rng);
    Tensor out = nans({B, T, C}, DType::f64);
    Tensor mean = nans({B, T}, DType::f64);
    Tensor rstd = nans({B, T}, DType::f64);
    backend.layernorm_forward(out, mean, rstd, inp, weight, bias);
    std::vector<double> expected(static_cast<std::size_t>(B) * T * C), mean_ref(B * T), rstd_ref(B * T);
    for (int r = 0; r < B * T; ++r) {
      const double* x = inp.data_as<double>() + r * C;
      double m = 0, var = 0;
      for (int c = 0; c < C; ++c) m += x[c] / C;
      for (int c = 0; c < C; ++c) var += (x[c] - m) * (x[c] - m) / C;
      mean_ref[r] = m;
      rstd_ref[r] = 1 / std::sqrt(var + 1e-5);
      for (int c = 0; c < C; ++c) {
        expected[static_cast<std::size_t>(r) * C + c] =
            (x[c] - m) * rstd_ref[r] * weight.data_as<double>()[c] + bias.data_as<double>()[c];
      }
    }
    CHECK(max_abs_difference(out, expected) < 1e-12);
    CHECK(max_abs_difference(mean, mean_ref) < 1e-12);
    CHECK(max_abs_difference(rstd, rstd_ref) < 1e-12);
  }
  SECTION("encoder") {
    const Tensor tokens = random_ids({B, T}, rng, Vp);
    const Tensor wte = normal_tensor({Vp, C}, rng);
    const Tensor wpe = normal_tensor({T + 3, C}, rng);
    Tensor out = nans({B, T, C}, DType::f64);
    backend.encoder_forward(out, tokens, wte, wpe);
    std::vector<double> expected(static_cast<std::size_t>(B) * T * C);
    for (int b = 0; b < B; ++b) {
      for (int t = 0; t < T; ++t) {
        const int token = tokens.data_as<std::int32_t>()[b * T + t];
        for (int c = 0; c < C; ++c) {
          expected[(static_cast<std::size_t>(b) * T + t) * C + c] =
              wte.data_as<double>()[token * C + c] + wpe.data_as<double>()[t * C + c];
        }
      }
    }
    CHECK(max_abs_difference(out, expected) == 0.0);
  }
  SECTION("crossentropy") {
    const Tensor logits = normal_tensor({B, T, Vp}, rng, 3.0);
    const Tensor targets = random_ids({B, T}, rng, V);
    Tensor losses = nans({B, T}, DType::f64);
    Tensor probs = nans({B, T, Vp}, DType::f64);
    backend.crossentropy_forward(losses, probs, logits, targets, V);
    std::vector<double> loss_ref(B * T), probs_ref(static_cast<std::size_t>(B) * T * Vp, 0.0);
    for (int r = 0; r < B * T; ++r) {
      const double* x = logits.data_as<double>() + r * Vp;
      double sum = 0;
      for (int j = 0; j < V; ++j) sum += std::exp(x[j]);
      for (int j = 0; j < V; ++j) probs_ref[static_cast<std::size_t>(r) * Vp + j] = std::exp(x[j]) / sum;
      loss_ref[r] = -std::log(probs_ref[static_cast<std::size_t>(r) * Vp + targets.data_as<std::int32_t>()[r]]);
    }
    CHECK(max_abs_difference(probs, probs_ref) < 1e-14);
    CHECK(max_abs_difference(losses, loss_ref) < 1e-12);
  }
}

TEST_CASE("f32 kernels agree with f64 kernels", "[kernels]") {
  CpuBackend backend(1);
  std::mt19937 rng(22);
  constexpr int B = 2, T = 67, C = 96, NH = 3, V = 100, Vp = 128;
  constexpr double tol = 2e-6;

  SECTION("encoder") {
    const Tensor tokens = random_ids({B, T}, rng, Vp);
    const Tensor wte = normal_tensor({Vp, C}, rng), wpe = normal_tensor({T, C}, rng),
                 dout = normal_tensor({B, T, C}, rng);
    check_f32_matches_f64(
        [&](DType dt) {
          Tensor out = Tensor::zeros({B, T, C}, dt), dwte = Tensor::zeros({Vp, C}, dt),
                 dwpe = Tensor::zeros({T, C}, dt);
          backend.encoder_forward(out, tokens, as(wte, dt), as(wpe, dt));
          backend.encoder_backward(dwte, dwpe, as(dout, dt), tokens);
          return std::vector<std::pair<std::string, Tensor>>{{"out", out}, {"dwte", dwte}, {"dwpe", dwpe}};
        },
        tol);
  }
  SECTION("layernorm") {
    const Tensor inp = normal_tensor({B, T, C}, rng, 3.0, 1.0), weight = normal_tensor({C}, rng, 0.2, 1.0),
                 bias = normal_tensor({C}, rng), dout = normal_tensor({B, T, C}, rng);
    check_f32_matches_f64(
        [&](DType dt) {
          Tensor out = Tensor::zeros({B, T, C}, dt), mean = Tensor::zeros({B, T}, dt), rstd = Tensor::zeros({B, T}, dt);
          Tensor dinp = Tensor::zeros({B, T, C}, dt), dweight = Tensor::zeros({C}, dt), dbias = Tensor::zeros({C}, dt);
          const Tensor x = as(inp, dt), w = as(weight, dt);
          backend.layernorm_forward(out, mean, rstd, x, w, as(bias, dt));
          backend.layernorm_backward(dinp, dweight, dbias, as(dout, dt), x, w, mean, rstd);
          return std::vector<std::pair<std::string, Tensor>>{{"out", out},   {"mean", mean},       {"rstd", rstd},
                                                             {"dinp", dinp}, {"dweight", dweight}, {"dbias", dbias}};
        },
        tol);
  }
  SECTION("matmul") {
    constexpr int OC = 4 * C;
    const Tensor inp = normal_tensor({B, T, C}, rng), weight = normal_tensor({OC, C}, rng, 0.1),
                 bias = normal_tensor({OC}, rng), dout = normal_tensor({B, T, OC}, rng);
    check_f32_matches_f64(
        [&](DType dt) {
          Tensor out = Tensor::zeros({B, T, OC}, dt), dinp = Tensor::zeros({B, T, C}, dt);
          Tensor dweight = Tensor::zeros({OC, C}, dt), dbias = Tensor::zeros({OC}, dt);
          const Tensor x = as(inp, dt), w = as(weight, dt);
          backend.matmul_forward(out, x, w, as(bias, dt));
          backend.matmul_backward(dinp, dweight, dbias, as(dout, dt), x, w);
          return std::vector<std::pair<std::string, Tensor>>{
              {"out", out}, {"dinp", dinp}, {"dweight", dweight}, {"dbias", dbias}};
        },
        tol);
  }
  SECTION(
      "attention, at T = 67, at the small model's shape (T 256, C 384, 6 heads), and at T = 1100 with heads of 20 "
      "columns (two key chunks; columns that fill no vector)") {
    struct Shape4 {
      int b, t, c, nh;
    };
    const Shape4 s = GENERATE(Shape4{B, T, C, NH}, Shape4{2, 256, 384, 6}, Shape4{1, 1100, 40, 2});
    const Tensor qkv = normal_tensor({s.b, s.t, 3 * s.c}, rng), dout = normal_tensor({s.b, s.t, s.c}, rng);
    check_f32_matches_f64(
        [&](DType dt) {
          Tensor out = Tensor::zeros({s.b, s.t, s.c}, dt);
          Tensor att = Tensor::zeros(backend.attention_state_shape(s.b, s.nh, s.t), dt);
          Tensor dqkv = nans({s.b, s.t, 3 * s.c}, dt), datt = nans(att.shape(), dt);
          const Tensor x = as(qkv, dt);
          backend.attention_forward(out, att, x, s.nh);
          backend.attention_backward(dqkv, datt, as(dout, dt), x, att, s.nh);
          return std::vector<std::pair<std::string, Tensor>>{{"out", out}, {"att", att}, {"dqkv", dqkv}};
        },
        tol);
  }
  SECTION("gelu and residual") {
    const Tensor inp = normal_tensor({B, T, 4 * C}, rng, 3.0), other = normal_tensor({B, T, 4 * C}, rng),
                 dout = normal_tensor({B, T, 4 * C}, rng);
    check_f32_matches_f64(
        [&](DType dt) {
          Tensor out = Tensor::zeros(inp.shape(), dt), dinp = Tensor::zeros(inp.shape(), dt),
                 sum = Tensor::zeros(inp.shape(), dt);
          const Tensor x = as(inp, dt);
          backend.gelu_forward(out, x);
          backend.gelu_backward(dinp, x, as(dout, dt));
          backend.residual_forward(sum, x, as(other, dt));
          return std::vector<std::pair<std::string, Tensor>>{{"gelu out", out}, {"gelu dinp", dinp}, {"residual", sum}};
        },
        tol);
  }
  SECTION("crossentropy") {
    const Tensor logits = normal_tensor({B, T, Vp}, rng, 3.0);
    const Tensor targets = random_ids({B, T}, rng, V);
    check_f32_matches_f64(
        [&](DType dt) {
          Tensor losses = Tensor::zeros({B, T}, dt), probs = Tensor::zeros({B, T, Vp}, dt),
                 dlogits = Tensor::zeros({B, T, Vp}, dt);
          backend.crossentropy_forward(losses, probs, as(logits, dt), targets, V);
          backend.crossentropy_backward(dlogits, probs, targets, 1.0f / (B * T));
          return std::vector<std::pair<std::string, Tensor>>{
              {"losses", losses}, {"probs", probs}, {"dlogits", dlogits}};
        },
        tol);
  }
  SECTION("adamw, sum of squares and scale") {
    constexpr int n = 1000;
    const Tensor param = normal_tensor({n}, rng), grad = normal_tensor({n}, rng, 0.1);
    check_f32_matches_f64(
        [&](DType dt) {
          Tensor p = as(param, dt), m = Tensor::zeros({n}, dt), v = Tensor::zeros({n}, dt), g = as(grad, dt);
          const AdamWSegment segments[] = {{0, 0, 600, true}, {600, 600, n - 600, false}};
          AdamWHyper hyper;
          hyper.weight_decay = 0.1f;
          for (long step = 1; step <= 3; ++step) {
            hyper.step = step;
            backend.adamw_update(p, g, m, v, segments, hyper);
          }
          Tensor norm2 = filled({1}, dt, backend.sum_of_squares(g));
          backend.scale(g, 0.25f);
          return std::vector<std::pair<std::string, Tensor>>{
              {"param", p}, {"m", m}, {"v", v}, {"sum of squares", norm2}, {"scaled", g}};
        },
        tol);
  }
}

TEST_CASE("attention output and state of a row ignore every later position", "[kernels]") {
  CpuBackend backend(1);
  std::mt19937 rng(23);
  const DType dtype = GENERATE(DType::f32, DType::f64);
  constexpr int B = 2, T = 67, C = 96, NH = 3, kept = 40;
  Tensor qkv = as(normal_tensor({B, T, 3 * C}, rng, 2.0), dtype);
  auto run = [&] {
    Tensor out = nans({B, T, C}, dtype);
    Tensor att = nans(backend.attention_state_shape(B, NH, T), dtype);
    backend.attention_forward(out, att, qkv, NH);
    return std::pair{out, att};
  };
  const auto [out, att] = run();
  const Tensor changed = as(normal_tensor({B, T, 3 * C}, rng, 2.0), dtype);
  for (int b = 0; b < B; ++b) {
    for (std::int64_t i = (static_cast<std::int64_t>(b) * T + kept) * 3 * C; i < (b + 1) * T * 3 * C; ++i) {
      if (dtype == DType::f32) {
        qkv.data_as<float>()[i] = changed.data_as<float>()[i];
      } else {
        qkv.data_as<double>()[i] = changed.data_as<double>()[i];
      }
    }
  }
  const auto [out2, att2] = run();
  int moved = 0;
  for (int b = 0; b < B; ++b) {
    for (int i = 0; i < kept; ++i) {
      for (int c = 0; c < C; ++c) {
        const std::int64_t e = (static_cast<std::int64_t>(b) * T + i) * C + c;
        if (at(out, e) != at(out2, e)) ++moved;
      }
      for (int h = 0; h < NH; ++h) {
        const std::int64_t e = (static_cast<std::int64_t>(b) * NH + h) * T + i;
        if (at(att, e) != at(att2, e)) ++moved;
      }
    }
  }
  INFO("dtype " << dtype_name(dtype));
  CHECK(moved == 0);
}

TEST_CASE("crossentropy leaves the padded vocabulary columns at exactly zero", "[kernels]") {
  CpuBackend backend(1);
  std::mt19937 rng(24);
  constexpr int B = 3, T = 7, V = 50, Vp = 64;
  const Tensor logits = as(normal_tensor({B, T, Vp}, rng, 4.0), DType::f32);
  const Tensor targets = random_ids({B, T}, rng, V);
  Tensor losses = nans({B, T}, DType::f32);
  Tensor probs = nans({B, T, Vp}, DType::f32);
  Tensor dlogits = nans({B, T, Vp}, DType::f32);
  backend.crossentropy_forward(losses, probs, logits, targets, V);
  backend.crossentropy_backward(dlogits, probs, targets, 0.5f);
  for (int r = 0; r < B * T; ++r) {
    double sum = 0;
    for (int j = 0; j < V; ++j) sum += probs.data_as<float>()[r * Vp + j];
    for (int j = V; j < Vp; ++j) {
      INFO("row " << r << " column " << j);
      CHECK(probs.data_as<float>()[r * Vp + j] == 0.0f);
      CHECK(dlogits.data_as<float>()[r * Vp + j] == 0.0f);
    }
    const int target = targets.data_as<std::int32_t>()[r];
    CHECK(std::abs(sum - 1) < 1e-5);
    CHECK(losses.data_as<float>()[r] == Approx(-std::log(probs.data_as<float>()[r * Vp + target])).epsilon(1e-5));
    CHECK(dlogits.data_as<float>()[r * Vp + target] ==
          Approx(0.5f * (probs.data_as<float>()[r * Vp + target] - 1)).epsilon(1e-6));
  }
}

TEST_CASE("adamw matches a hand computation over two steps, decayed and not", "[kernels]") {
  CpuBackend backend(1);
  const DType dtype = GENERATE(DType::f32, DType::f64);
  constexpr int n = 37;  // not a multiple of any vector width
  AdamWHyper hyper;
  hyper.lr = 0.01f;
  hyper.beta1 = 0.9f;
  hyper.beta2 = 0.95f;
  hyper.eps = 1e-8f;
  hyper.weight_decay = 0.1f;

  constexpr int decayed = 20;  // elements [0, 20) decay, the rest do not
  const AdamWSegment segments[] = {{0, 0, decayed, true}, {decayed, decayed, n - decayed, false}};
  std::vector<double> p(n), m(n, 0.0), v(n, 0.0), g1(n), g2(n);
  for (int i = 0; i < n; ++i) {
    p[i] = 0.5 - 0.03 * i;
    g1[i] = 0.2 * std::sin(i + 1.0);
    g2[i] = i % 5 == 0 ? 0.0 : -0.1 * std::cos(2.0 * i);  // zero gradients still decay and move
  }
  auto to_tensor = [&](const std::vector<double>& x) {
    Tensor master = Tensor::zeros({n}, DType::f64);
    std::copy(x.begin(), x.end(), master.data_as<double>());
    return as(master, dtype);
  };
  // The hyper-parameters are floats: the expected values use exactly those numbers.
  const double lr = hyper.lr, b1 = hyper.beta1, b2 = hyper.beta2, eps = hyper.eps, wd = hyper.weight_decay;
  Tensor param = to_tensor(p), mt = to_tensor(m), vt = to_tensor(v);
  const Tensor grad1 = to_tensor(g1), grad2 = to_tensor(g2);
  for (int step = 1; step <= 2; ++step) {
    const auto& g = step == 1 ? g1 : g2;
    for (int i = 0; i < n; ++i) {
      m[i] = b1 * m[i] + (1 - b1) * g[i];
      v[i] = b2 * v[i] + (1 - b2) * g[i] * g[i];
      const double m_hat = m[i] / (1 - std::pow(b1, step));
      const double v_hat = v[i] / (1 - std::pow(b2, step));
      p[i] -= lr * (m_hat / (std::sqrt(v_hat) + eps) + (i < decayed ? wd : 0.0) * p[i]);
    }
    hyper.step = step;
    backend.adamw_update(param, step == 1 ? grad1 : grad2, mt, vt, segments, hyper);
  }
  const double tol = dtype == DType::f32 ? 2e-6 : 1e-13;
  for (int i = 0; i < n; ++i) {
    INFO(dtype_name(dtype) << " element " << i);
    CHECK(at(param, i) == Approx(p[i]).epsilon(tol).margin(tol));
    CHECK(at(mt, i) == Approx(m[i]).epsilon(tol).margin(tol * 1e-2));
    CHECK(at(vt, i) == Approx(v[i]).epsilon(tol).margin(tol * 1e-4));
  }
}

TEST_CASE("vectorized exp and sqrt, and gelu, are accurate across the float range", "[kernels]") {
  SECTION("vexp within 1e-6 relative of exp on [-87, 87], finite and saturating beyond") {
    std::vector<float> x, y;
    for (double t = -87.0; t <= 87.0; t += 0.000731) x.push_back(static_cast<float>(t));
    for (float edge : {-100.0f, -87.5f, 87.5f, 100.0f, 0.0f, -0.0f, 1e-30f}) x.push_back(edge);
    y.resize(x.size());
    apply_vexp(y.data(), x.data(), static_cast<int>(x.size()));
    double worst = 0;
    for (std::size_t i = 0; i < x.size(); ++i) {
      REQUIRE(std::isfinite(y[i]));
      if (std::abs(x[i]) <= 87.0f) worst = std::max(worst, std::abs(y[i] / std::exp(static_cast<double>(x[i])) - 1));
    }
    CAPTURE(worst);
    CHECK(worst < 1e-6);
    CHECK(y[x.size() - 7] == 0.0f);  // exp(-100) flushes to 0
    CHECK(y[x.size() - 4] > 1e37f);  // exp(100) saturates, finite
    CHECK(y[x.size() - 3] == 1.0f);  // exp(0) is exact
  }
  SECTION("vsqrt equals sqrt, denormals and zero included") {
    std::vector<float> x, y;
    for (std::uint32_t bits = 0; bits < 0x7f800000u; bits += 0x10001u) x.push_back(std::bit_cast<float>(bits));
    y.resize(x.size());
    apply_vsqrt(y.data(), x.data(), static_cast<int>(x.size()));
    int mismatches = 0;
    for (std::size_t i = 0; i < x.size(); ++i) mismatches += y[i] != std::sqrt(x[i]);
    CAPTURE(x.size());
    CHECK(mismatches == 0);
  }
  SECTION("gelu forward and backward against the tanh formula, no NaN or inf at +-100") {
    CpuBackend backend(1);
    std::vector<float> xs;
    for (double t = -100.0; t <= 100.0; t += 0.00173) xs.push_back(static_cast<float>(t));
    for (float edge : {-100.0f, 100.0f, 0.0f}) xs.push_back(edge);
    const auto n = static_cast<std::int64_t>(xs.size());
    Tensor inp = Tensor::zeros({n}, DType::f32);
    std::copy(xs.begin(), xs.end(), inp.data_as<float>());
    Tensor out = Tensor::zeros({n}, DType::f32), dinp = Tensor::zeros({n}, DType::f32);
    const Tensor ones = filled({n}, DType::f32, 1.0);
    backend.gelu_forward(out, inp);
    backend.gelu_backward(dinp, inp, ones);
    // Errors in units of the allowed error: 1e-6 relative where |gelu| >= 0.01 (x > -2.9), 1e-8
    // absolute in the negative tail, where rounding u to float moves the result by |2u| ulps in
    // any float implementation (and 1 + tanh(u) cancels in the double reference too).
    double worst_out = 0, worst_grad = 0;
    bool finite = true;
    for (std::int64_t i = 0; i < n; ++i) {
      const double x = xs[static_cast<std::size_t>(i)];
      finite = finite && std::isfinite(out.data_as<float>()[i]) && std::isfinite(dinp.data_as<float>()[i]);
      const double ref = gelu_reference(x), dref = gelu_derivative_reference(x);
      worst_out = std::max(worst_out, std::abs(out.data_as<float>()[i] - ref) / (1e-6 * std::max(std::abs(ref), 0.01)));
      worst_grad =
          std::max(worst_grad, std::abs(dinp.data_as<float>()[i] - dref) / (1e-6 * std::max(1.0, std::abs(dref))));
    }
    CHECK(finite);
    CAPTURE(worst_out, worst_grad);
    CHECK(worst_out < 1);
    CHECK(worst_grad < 1);
  }
}

namespace {

// Inputs for one forward and backward through every layer, in f32.
struct ChainInputs {
  int B, T, C, NH, V, Vp;
  Tensor tokens, targets, wte, wpe, lnw, lnb, w_qkv, b_qkv, w_head, w_proj, b_proj;

  ChainInputs(int B_, int T_, int C_, int NH_, int V_, int Vp_, std::uint32_t seed)
      : B(B_), T(T_), C(C_), NH(NH_), V(V_), Vp(Vp_) {
    std::mt19937 rng(seed);
    tokens = random_ids({B, T}, rng, V);
    targets = random_ids({B, T}, rng, V);
    wte = as(normal_tensor({Vp, C}, rng), DType::f32);
    wpe = as(normal_tensor({T, C}, rng), DType::f32);
    lnw = as(normal_tensor({C}, rng, 0.1, 1.0), DType::f32);
    lnb = as(normal_tensor({C}, rng), DType::f32);
    w_qkv = as(normal_tensor({3 * C, C}, rng, 0.2), DType::f32);
    b_qkv = as(normal_tensor({3 * C}, rng), DType::f32);
    w_head = as(normal_tensor({Vp, C}, rng, 0.2), DType::f32);
    w_proj = as(normal_tensor({C, C}, rng, 0.2), DType::f32);
    b_proj = as(normal_tensor({C}, rng), DType::f32);
  }
};

// One forward and backward through a chain of every layer, then AdamW over segments of uneven
// sizes, the clip's scale and sum of squares; returns every tensor it wrote.
std::vector<Tensor> every_op_once(CpuBackend& backend, const ChainInputs& in) {
  const int B = in.B, T = in.T, C = in.C, NH = in.NH, Vp = in.Vp;
  std::vector<Tensor> t;
  auto make = [&](Shape s) {
    t.push_back(Tensor::zeros(std::move(s), DType::f32));
    return t.back();
  };
  Tensor x = make({B, T, C}), ln = make({B, T, C}), mean = make({B, T}), rstd = make({B, T});
  Tensor qkv = make({B, T, 3 * C}), att = make(backend.attention_state_shape(B, NH, T)), a = make({B, T, C}),
         h = make({B, T, C});
  Tensor g = make({B, T, C}), logits = make({B, T, Vp}), losses = make({B, T}), probs = make({B, T, Vp});
  backend.encoder_forward(x, in.tokens, in.wte, in.wpe);
  backend.layernorm_forward(ln, mean, rstd, x, in.lnw, in.lnb);
  backend.matmul_forward(qkv, ln, in.w_qkv, in.b_qkv);
  backend.attention_forward(a, att, qkv, NH);
  backend.residual_forward(h, x, a);
  Tensor projected = make({B, T, C});
  backend.matmul_residual_forward(projected, a, in.w_proj, in.b_proj, h);
  backend.gelu_forward(g, projected);
  backend.matmul_forward(logits, g, in.w_head, Tensor());
  backend.crossentropy_forward(losses, probs, logits, in.targets, in.V);
  Tensor dlogits = make({B, T, Vp}), dg = make({B, T, C}), dw_head = make({Vp, C}), dh = make({B, T, C});
  Tensor dqkv = make({B, T, 3 * C}), datt = make(att.shape()), dln = make({B, T, C});
  Tensor dw_qkv = make({3 * C, C}), db_qkv = make({3 * C}), dx = make({B, T, C}), dlnw = make({C}), dlnb = make({C});
  Tensor dwte = make({Vp, C}), dwpe = make({T, C});
  backend.crossentropy_backward(dlogits, probs, in.targets, 1.0f / (B * T));
  Tensor no_bias;
  backend.matmul_backward(dg, dw_head, no_bias, dlogits, g, in.w_head);
  backend.gelu_backward(dh, projected, dg);
  Tensor dh_fused = make({B, T, C}), dbias_fused = make({C});
  backend.gelu_bias_backward(dh_fused, dbias_fused, projected, dg);
  backend.attention_backward(dqkv, datt, dh, qkv, att, NH);
  backend.matmul_backward(dln, dw_qkv, db_qkv, dqkv, ln, in.w_qkv);
  backend.copy(dx, dh);
  backend.layernorm_backward(dx, dlnw, dlnb, dln, x, in.lnw, mean, rstd);
  backend.encoder_backward(dwte, dwpe, dx, in.tokens);
  Tensor p = make({3 * C, C}), m = make({3 * C, C}), v = make({3 * C, C});
  backend.copy(p, in.w_qkv);
  // Uneven segments, some decayed, the moments laid out in another order than the parameters.
  const std::int64_t n = p.numel(), first = 37, second = n / 3 + 5;
  const AdamWSegment segments[] = {{0, n - first, first, true},
                                   {first, 0, second, false},
                                   {first + second, first + second - first, n - first - second, true}};
  backend.adamw_update(p, dw_qkv, m, v, segments, AdamWHyper{});
  backend.scale(dw_qkv, 0.5f);
  make({1}).data_as<float>()[0] = static_cast<float>(backend.sum_of_squares(dwte));
  // 110,592 elements: more than one of the blocks the backend sums on separate threads.
  t.push_back(Tensor::zeros({1}, DType::f64));
  t.back().data_as<double>()[0] = backend.sum_of_squares(p);
  return t;
}

void check_all_bitwise_equal(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    INFO("tensor " << i << " " << a[i].describe());
    CHECK(bitwise_equal(a[i], b[i]));
  }
}

}  // namespace

TEST_CASE("kernels are bitwise deterministic", "[kernels]") {
  CpuBackend backend(1);
  const ChainInputs in(2, 67, 96, 3, 100, 128, 25);
  check_all_bitwise_equal(every_op_once(backend, in), every_op_once(backend, in));
}

// From 2 MiB on the zeros go out through streaming stores, 16 bytes at a time from the first
// 16-byte boundary; the slice starts 12 bytes past one and ends off one.
TEST_CASE("fill_zero of a large slice zeroes exactly its elements", "[kernels]") {
  for (const int threads : {1, 2}) {
    CpuBackend backend(threads);
    Tensor whole = filled({600'003}, DType::f32, 7.0);
    const std::int64_t first = 3, count = 590'001;
    Tensor part = whole.slice(first, {count});
    REQUIRE(part.nbytes() >= std::size_t{2} << 20);
    backend.fill_zero(part);
    std::int64_t wrong = 0;
    for (std::int64_t i = 0; i < whole.numel(); ++i) {
      const bool inside = i >= first && i < first + count;
      if (whole.data_as<float>()[i] != (inside ? 0.0f : 7.0f)) ++wrong;
    }
    INFO("threads " << threads);
    CHECK(wrong == 0);
  }
}

// The model sums the fc bias's gradient as GELU's backward writes d(fch) (gpt_stage.cpp): the
// fused sweep, split by columns, must give what the two calls give, which other backends run.
TEST_CASE("gelu's backward with the bias gradient writes what gelu_backward then bias_backward write",
          "[kernels]") {
  std::mt19937 rng(28);
  const Tensor inp = normal_tensor({67, 259}, rng, 3.0), dout = normal_tensor({67, 259}, rng);
  const Tensor bias_grad = normal_tensor({259}, rng);
  for (const DType dtype : {DType::f32, DType::f64}) {
    for (const int threads : {1, 2, 3}) {
      CpuBackend backend(threads);
      const Tensor x = as(inp, dtype), d = as(dout, dtype);
      Tensor apart = Tensor::zeros(x.shape(), dtype), apart_bias = as(bias_grad, dtype);
      backend.gelu_backward(apart, x, d);
      backend.bias_backward(apart_bias, apart);
      Tensor fused = as(dout, dtype), fused_bias = as(bias_grad, dtype);
      backend.gelu_bias_backward(fused, fused_bias, x, fused);
      Tensor composed = Tensor::zeros(x.shape(), dtype), composed_bias = as(bias_grad, dtype);
      backend.Backend::gelu_bias_backward(composed, composed_bias, x, d);
      INFO(dtype_name(dtype) << ", threads " << threads);
      CHECK(bitwise_equal(fused, apart));
      CHECK(bitwise_equal(fused_bias, apart_bias));
      CHECK(bitwise_equal(composed, apart));
      CHECK(bitwise_equal(composed_bias, apart_bias));
      CHECK_FALSE(bitwise_equal(fused_bias, as(bias_grad, dtype)));
    }
  }
}

// The model's backward writes d(fch) over d(GELU output) (gpt_stage.cpp).
TEST_CASE("gelu's backward in place writes what it writes into another buffer", "[kernels]") {
  std::mt19937 rng(27);
  const Tensor inp = as(normal_tensor({3, 67, 96}, rng, 3.0), DType::f32);
  const Tensor dout = as(normal_tensor({3, 67, 96}, rng), DType::f32);
  for (const int threads : {1, 2}) {
    CpuBackend backend(threads);
    Tensor apart = Tensor::zeros(inp.shape(), DType::f32), in_place = Tensor::zeros(inp.shape(), DType::f32);
    backend.gelu_backward(apart, inp, dout);
    backend.copy(in_place, dout);
    backend.gelu_backward(in_place, inp, in_place);
    INFO("threads " << threads);
    CHECK(bitwise_equal(apart, in_place));
  }
}

namespace {

// Whether OpenBLAS's products on `threads` threads give one thread's bits here, for the chain's
// shapes: its AVX-512 kernels do; its Haswell and Zen kernels sum a product's edge tiles in
// another order, and its threads' split moves which rows are edges.
bool products_independent_of_threads(const ChainInputs& in, int threads) {
  std::mt19937 rng(30);
  const Tensor inp = as(normal_tensor({in.B, in.T, in.C}, rng), DType::f32);
  auto products = [&](CpuBackend& backend) {
    Tensor out = Tensor::zeros({in.B, in.T, 3 * in.C}, DType::f32), dinp = Tensor::zeros(inp.shape(), DType::f32);
    Tensor dweight = Tensor::zeros(in.w_qkv.shape(), DType::f32), dbias = Tensor::zeros({3 * in.C}, DType::f32);
    backend.matmul_forward(out, inp, in.w_qkv, in.b_qkv);
    backend.matmul_backward(dinp, dweight, dbias, out, inp, in.w_qkv);
    return std::vector<Tensor>{out, dinp, dweight};
  };
  // One backend after the other: a backend sets OpenBLAS's threads, which are the process's.
  std::vector<Tensor> a, b;
  {
    CpuBackend one(1);
    a = products(one);
  }
  {
    CpuBackend many(threads);
    b = products(many);
  }
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!bitwise_equal(a[i], b[i])) return false;
  return true;
}

}  // namespace

// The backend's own threads split each op so every element, row and head is computed as on one
// thread (cpu_backend.hpp). The shapes put the splits off every block and vector width: 2 × 131
// rows of 192 columns, 6 heads, AdamW segments of 37, 36,869 and 73,686 elements. The products
// are OpenBLAS's on as many threads: where its kernels give one thread's bits (AVX-512) the whole
// chain is held to them; elsewhere the test says so by name, holds what runs before the first
// product (the encoder and the first LayerNorm) to them and the rest within f32 sums' reach.
TEST_CASE("the cpu backend's results do not depend on its thread count", "[kernels]") {
  const ChainInputs in(2, 131, 192, 3, 100, 128, 26);
  CpuBackend one(1);
  const auto reference = every_op_once(one, in);
  for (const int threads : {2, 3, 4}) {
    INFO("threads " << threads);
    CpuBackend many(threads);
    const auto got = every_op_once(many, in);
    if (products_independent_of_threads(in, threads)) {
      check_all_bitwise_equal(reference, got);
      continue;
    }
    WARN("OpenBLAS's " << openblas_get_corename() << " kernels give a product on " << threads
                       << " threads other bits than on one: the ops after the first product are held within "
                          "2e-5 (f32 sums in another order), not bit for bit");
    REQUIRE(got.size() == reference.size());
    for (std::size_t i = 0; i < got.size(); ++i) {
      INFO("tensor " << i << " " << reference[i].describe());
      if (i < 4)
        CHECK(bitwise_equal(reference[i], got[i]));
      else
        CHECK(relative_difference(got[i], reference[i]) <= 2e-5);
    }
  }
}

TEST_CASE("the cpu backend rejects mismatched shapes, dtypes and ids", "[kernels]") {
  CpuBackend backend(1);
  Tensor x = Tensor::zeros({2, 3, 8}, DType::f32);
  Tensor out = Tensor::zeros({2, 3, 4}, DType::f32);
  CHECK_THROWS_AS(backend.matmul_forward(out, x, Tensor::zeros({4, 7}, DType::f32), Tensor()), std::logic_error);
  CHECK_THROWS_AS(backend.matmul_forward(out, x, Tensor::zeros({4, 8}, DType::f64), Tensor()), std::logic_error);
  CHECK_THROWS_AS(backend.matmul_forward(out, x, Tensor::zeros({4, 8}, DType::f32), Tensor::zeros({5}, DType::f32)),
                  std::logic_error);
  // A bf16 activation goes with f32 only (bf16 storage, compute/backend.hpp).
  Tensor bf = Tensor::zeros({2, 3, 8}, DType::bf16), wide = Tensor::zeros({2, 3, 8}, DType::f64);
  CHECK_THROWS_AS(backend.gelu_forward(bf, wide), std::logic_error);
  CHECK_THROWS_AS(backend.gelu_forward(wide, bf), std::logic_error);
  Tensor qkv = Tensor::zeros({2, 3, 24}, DType::f32), att = Tensor::zeros({2, 3, 3}, DType::f32);
  CHECK_THROWS_AS(backend.attention_forward(x, att, qkv, 3), std::logic_error);  // 3 heads do not divide C = 8

  Tensor tokens = Tensor::zeros({2, 3}, DType::i32);
  tokens.data_as<std::int32_t>()[4] = 16;  // wte has 16 rows
  const Tensor wte = Tensor::zeros({16, 8}, DType::f32), wpe = Tensor::zeros({3, 8}, DType::f32);
  CHECK_THROWS_AS(backend.encoder_forward(x, tokens, wte, wpe), std::logic_error);
  tokens.data_as<std::int32_t>()[4] = 15;
  CHECK_NOTHROW(backend.encoder_forward(x, tokens, wte, wpe));
  CHECK_THROWS_AS(backend.encoder_forward(x, tokens, wte, Tensor::zeros({2, 8}, DType::f32)), std::logic_error);

  Tensor logits = Tensor::zeros({2, 3, 16}, DType::f32), probs = Tensor::zeros({2, 3, 16}, DType::f32);
  Tensor losses = Tensor::zeros({2, 3}, DType::f32);
  CHECK_THROWS_AS(backend.crossentropy_forward(losses, probs, logits, tokens, 10), std::logic_error);  // 15 >= V
  CHECK_THROWS_AS(backend.crossentropy_forward(losses, probs, logits, tokens, 17), std::logic_error);  // V > Vp
}

TEST_CASE("OpenBLAS runs kernels that use the CPU's vector width", "[kernels]") {
  CpuBackend backend(1);
  const std::string core = troupe::compute::cpu::openblas_core();
  INFO("OpenBLAS core " << core << ", OPENBLAS_CORETYPE " << (std::getenv("OPENBLAS_CORETYPE") ? "set" : "unset"));
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && __builtin_cpu_supports("avx2")) {
    CHECK(core != "Prescott");
    CHECK(core != "Core2");
    CHECK(core != "Nehalem");
  }
  CHECK(!core.empty());
}
