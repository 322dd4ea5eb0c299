// The CPU backend's linear products under train.precision bf16 against float64 products of the
// same f32 inputs, within the bound docs/precision.md states: per output,
//   |out - exact| <= (2u + u^2 + (k + 1) 2^-23) * S,   u = 2^-8 (bf16's unit roundoff),
// where S is the sum over its k terms of |a||b| plus the magnitude of what the output starts from
// (bias, residual, the gradient accumulated so far). 2u + u^2 bounds a product of two operands
// each rounded to bf16; (k + 1) 2^-23 the f32 sums of the k terms and the start, with the
// products' growth (1 + u)^2 and the higher orders folded in. Each op is checked on this CPU's
// BF16 units (where it has them) and emulated, on 1 and 2 threads, at odd shapes (rows enough for
// two threads to split them, bf16_products.cpp's row_grain being 32), and must also err more than
// f32 sums could (2^-16 of S somewhere): the operands were rounded.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "compute/cpu/bf16_products.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/cpu/thread_team.hpp"
#include "support/bf16_units.hpp"
#include "support/random_tensor.hpp"

namespace {

using troupe::test::bf16_units_name;
using troupe::test::bf16_units_to_check;
using troupe::test::uniform_f32;

using troupe::compute::CpuBackend;
using troupe::compute::DType;
using troupe::compute::Precision;
using troupe::compute::Tensor;
using troupe::compute::cpu::Bf16Units;

constexpr int kRows = 77, kInputs = 70, kOutputs = 69;

// The bound above for an output of k terms whose magnitudes sum to s.
double bf16_bound(int k, double s) {
  const double u = std::ldexp(1.0, -8);
  return (2 * u + u * u + (k + 1) * std::ldexp(1.0, -23)) * s;
}

// Checks every output of `got` against exact[i] within bf16_bound(k, magnitude[i]); returns the
// largest error as a share of its magnitude sum.
double check_outputs(const Tensor& got, const std::vector<double>& exact, const std::vector<double>& magnitude, int k) {
  double worst = 0;
  for (std::size_t i = 0; i < exact.size(); ++i) {
    const double error = std::abs(got.data_as<float>()[i] - exact[i]);
    INFO("output " << i << ": " << got.data_as<float>()[i] << " against " << exact[i]);
    REQUIRE(error <= bf16_bound(k, magnitude[i]));
    worst = std::max(worst, error / magnitude[i]);
  }
  return worst;
}

}  // namespace

TEST_CASE("bf16 linear products, forward and both backward, are within the bf16 bound of float64 products",
          "[kernels][bf16]") {
  std::mt19937 rng(11);
  const Tensor inp = uniform_f32({kRows, kInputs}, rng), weight = uniform_f32({kOutputs, kInputs}, rng),
               bias = uniform_f32({kOutputs}, rng);
  const Tensor residual = uniform_f32({kRows, kOutputs}, rng), dout = uniform_f32({kRows, kOutputs}, rng);
  const Tensor dweight_before = uniform_f32({kOutputs, kInputs}, rng);
  const float* x = inp.data_as<float>();
  const float* w = weight.data_as<float>();
  const float* b = bias.data_as<float>();
  const float* r = residual.data_as<float>();
  const float* g = dout.data_as<float>();

  // Two threads split each product's rows (the weight gradient's: columns of the stored dout).
  for (const Bf16Units units : bf16_units_to_check())
    for (const int threads : {1, 2}) {
      INFO("units: " << bf16_units_name(units) << ", threads: " << threads);
      CpuBackend backend(threads, Precision::bf16, units);

      // out = bias + inp · weightᵀ, and the same onto the residual stream.
      std::vector<double> exact(kRows * kOutputs), magnitude(kRows * kOutputs), exact_residual(kRows * kOutputs),
          magnitude_residual(kRows * kOutputs);
      for (int n = 0; n < kRows; ++n)
        for (int o = 0; o < kOutputs; ++o) {
          double sum = b[o], abs_sum = std::abs(b[o]);
          for (int c = 0; c < kInputs; ++c) {
            sum += double(x[n * kInputs + c]) * w[o * kInputs + c];
            abs_sum += std::abs(double(x[n * kInputs + c]) * w[o * kInputs + c]);
          }
          exact[n * kOutputs + o] = sum;
          magnitude[n * kOutputs + o] = abs_sum;
          exact_residual[n * kOutputs + o] = sum + r[n * kOutputs + o];
          magnitude_residual[n * kOutputs + o] = abs_sum + std::abs(r[n * kOutputs + o]);
        }
      Tensor out = Tensor::zeros({kRows, kOutputs}, DType::f32);
      backend.matmul_forward(out, inp, weight, bias);
      CHECK(check_outputs(out, exact, magnitude, kInputs) > std::ldexp(1.0, -16));
      backend.matmul_residual_forward(out, inp, weight, bias, residual);
      CHECK(check_outputs(out, exact_residual, magnitude_residual, kInputs) > std::ldexp(1.0, -16));

      // dinp = dout · weight.
      std::vector<double> exact_dinp(kRows * kInputs), magnitude_dinp(kRows * kInputs);
      for (int n = 0; n < kRows; ++n)
        for (int c = 0; c < kInputs; ++c)
          for (int o = 0; o < kOutputs; ++o) {
            exact_dinp[n * kInputs + c] += double(g[n * kOutputs + o]) * w[o * kInputs + c];
            magnitude_dinp[n * kInputs + c] += std::abs(double(g[n * kOutputs + o]) * w[o * kInputs + c]);
          }
      Tensor dinp = Tensor::zeros({kRows, kInputs}, DType::f32);
      backend.matmul_backward_input(dinp, dout, weight);
      CHECK(check_outputs(dinp, exact_dinp, magnitude_dinp, kOutputs) > std::ldexp(1.0, -16));

      // dweight += doutᵀ · inp, onto a gradient already accumulated; dbias += column sums (f32).
      std::vector<double> exact_dweight(kOutputs * kInputs), magnitude_dweight(kOutputs * kInputs);
      for (int o = 0; o < kOutputs; ++o)
        for (int c = 0; c < kInputs; ++c) {
          double sum = dweight_before.data_as<float>()[o * kInputs + c], abs_sum = std::abs(sum);
          for (int n = 0; n < kRows; ++n) {
            sum += double(g[n * kOutputs + o]) * x[n * kInputs + c];
            abs_sum += std::abs(double(g[n * kOutputs + o]) * x[n * kInputs + c]);
          }
          exact_dweight[o * kInputs + c] = sum;
          magnitude_dweight[o * kInputs + c] = abs_sum;
        }
      Tensor dweight = Tensor::zeros({kOutputs, kInputs}, DType::f32), dbias = Tensor::zeros({kOutputs}, DType::f32);
      std::copy_n(dweight_before.data_as<float>(), kOutputs * kInputs, dweight.data_as<float>());
      backend.matmul_backward_weights(dweight, dbias, dout, inp);
      CHECK(check_outputs(dweight, exact_dweight, magnitude_dweight, kRows) > std::ldexp(1.0, -16));
      for (int o = 0; o < kOutputs; ++o) {
        double sum = 0, abs_sum = 0;
        for (int n = 0; n < kRows; ++n) {
          sum += g[n * kOutputs + o];
          abs_sum += std::abs(g[n * kOutputs + o]);
        }
        CHECK(std::abs(dbias.data_as<float>()[o] - sum) <= kRows * std::ldexp(1.0, -23) * abs_sum);  // f32 sums only
      }
    }
}

TEST_CASE("bf16 products on this cpu's BF16 units equal the emulated ones up to the order of the f32 sums",
          "[kernels][bf16]") {
  if (!troupe::compute::cpu::bf16_units_present()) {
    WARN("this CPU has no BF16 units: only the emulated products run here");
    return;
  }
  std::mt19937 rng(12);
  const Tensor inp = uniform_f32({kRows, kInputs}, rng), weight = uniform_f32({kOutputs, kInputs}, rng);
  CpuBackend hardware(1, Precision::bf16, Bf16Units::hardware), emulated(1, Precision::bf16, Bf16Units::emulated);
  Tensor a = Tensor::zeros({kRows, kOutputs}, DType::f32), b = Tensor::zeros({kRows, kOutputs}, DType::f32);
  hardware.matmul_forward(a, inp, weight, Tensor{});
  emulated.matmul_forward(b, inp, weight, Tensor{});
  for (int n = 0; n < kRows; ++n)
    for (int o = 0; o < kOutputs; ++o) {
      double abs_sum = 0;
      for (int c = 0; c < kInputs; ++c)
        abs_sum += std::abs(double(inp.data_as<float>()[n * kInputs + c]) * weight.data_as<float>()[o * kInputs + c]);
      // Both sum the same rounded products in f32, each within kInputs 2^-24 (1 + u)^2 of S of the exact sum.
      CHECK(std::abs(a.data_as<float>()[n * kOutputs + o] - b.data_as<float>()[n * kOutputs + o]) <=
            2 * kInputs * std::ldexp(1.0, -23) * abs_sum);
    }
}

TEST_CASE("f64 products under bf16 are the fp32 policy's, bit for bit: finite differences stay exact",
          "[kernels][bf16]") {
  std::mt19937 rng(13);
  Tensor inp = Tensor::zeros({kRows, kInputs}, DType::f64), weight = Tensor::zeros({kOutputs, kInputs}, DType::f64);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (std::int64_t i = 0; i < inp.numel(); ++i) inp.data_as<double>()[i] = uniform(rng);
  for (std::int64_t i = 0; i < weight.numel(); ++i) weight.data_as<double>()[i] = uniform(rng);
  CpuBackend bf16(1, Precision::bf16), fp32(1, Precision::fp32);
  Tensor a = Tensor::zeros({kRows, kOutputs}, DType::f64), b = Tensor::zeros({kRows, kOutputs}, DType::f64);
  bf16.matmul_forward(a, inp, weight, Tensor{});
  fp32.matmul_forward(b, inp, weight, Tensor{});
  CHECK(std::equal(a.data_as<double>(), a.data_as<double>() + a.numel(), b.data_as<double>()));
}

// The team's parts run oneDNN matmuls at once, often the same one (equal parts, equal shapes):
// each must have its own scratchpad, or one part's sums land in the other's. At a small model's
// shapes, where the matmuls use one, two threads give the same bits every time, and the forward
// and input-gradient products (whose parts split rows that keep their sums whole) one thread's bits;
// the weight gradient's parts may block its long sums otherwise than one matmul of every row does.
TEST_CASE("bf16 products on two threads give the same bits every time at a model's shapes", "[kernels][bf16]") {
  constexpr int rows = 2048, width = 384, out_width = 1536;
  std::mt19937 rng(14);
  const Tensor inp = uniform_f32({rows, width}, rng), weight = uniform_f32({out_width, width}, rng),
               bias = uniform_f32({out_width}, rng), dout = uniform_f32({rows, out_width}, rng);
  for (const Bf16Units units : bf16_units_to_check()) {
    INFO(bf16_units_name(units));
    CpuBackend one(1, Precision::bf16, units), two(2, Precision::bf16, units);
    auto products = [&](CpuBackend& backend) {
      Tensor out = Tensor::zeros({rows, out_width}, DType::f32), dinp = Tensor::zeros({rows, width}, DType::f32);
      Tensor dweight = Tensor::zeros({out_width, width}, DType::f32), dbias = Tensor::zeros({out_width}, DType::f32);
      backend.matmul_forward(out, inp, weight, bias);
      backend.matmul_backward_input(dinp, dout, weight);
      backend.matmul_backward_weights(dweight, dbias, dout, inp);
      return std::vector<Tensor>{out, dinp, dweight};
    };
    auto same = [](const Tensor& a, const Tensor& b) { return std::memcmp(a.data(), b.data(), a.nbytes()) == 0; };
    const std::vector<Tensor> alone = products(one), first = products(two);
    CHECK(same(first[0], alone[0]));
    CHECK(same(first[1], alone[1]));
    for (int round = 1; round < 4; ++round) {
      const std::vector<Tensor> again = products(two);
      for (std::size_t i = 0; i < again.size(); ++i) {
        INFO("round " << round << ", product " << i);
        CHECK(same(again[i], first[i]));
      }
    }
  }
}

// A mixture-of-experts layer's products take as many shapes as its experts' row counts take values:
// the matmuls cached by shape stay at most 256, and a product made again after the cache was
// emptied gives the same bits.
TEST_CASE("bf16 products on BF16 units keep at most 256 matmuls over many shapes, and remake one to the same bits",
          "[kernels][bf16][moe]") {
  if (!troupe::compute::cpu::bf16_units_present()) {
    WARN("this CPU has no BF16 units: no oneDNN matmuls are cached here");
    return;
  }
  std::mt19937 rng(13);
  constexpr int rows = 300, width = 24, outputs = 40;
  const Tensor a = uniform_f32({rows, width}, rng), b = uniform_f32({outputs, width}, rng);
  troupe::compute::cpu::ThreadTeam team(2);
  troupe::compute::cpu::Bf16Products products(team, Bf16Units::hardware);
  // m rows of a times the first n rows of b, transposed.
  auto product = [&](int m, int n) {
    std::vector<float> c(static_cast<std::size_t>(m) * n);
    products.gemm(false, true, m, n, width, {a.data_as<float>(), nullptr}, width, {b.data_as<float>(), nullptr}, width,
                  false, c.data(), n);
    return c;
  };
  const std::vector<float> first = product(40, outputs);
  std::size_t most = 0, cleared = 0;
  for (int n : {outputs, outputs - 7, outputs - 13})
    for (int m = 1; m <= rows; ++m) {
      const std::size_t before = products.matmuls_kept();
      product(m, n);
      if (products.matmuls_kept() < before) ++cleared;
      most = std::max(most, products.matmuls_kept());
    }
  CHECK(most <= 256);
  CHECK(most >= 250);  // the shapes were cached until the cache was full
  CHECK(cleared >= 1);
  const std::vector<float> again = product(40, outputs);
  CHECK(std::memcmp(first.data(), again.data(), first.size() * sizeof(float)) == 0);
}
