// The CPU backend's grouped products (all of a rank's experts in one run of its team) against
// Backend's default, one matmul per expert with rows: uneven counts, an expert with none and one
// with a single row, with and without biases, f64, f32 and under bf16 (on BF16 units where oneDNN
// has them, and emulated), on teams of 1, 2 and 3 threads, so that shares cut through experts' rows
// and through an expert's weight-gradient rows. A share that missed a row or an output, or that
// two shares both wrote, would be off by a whole term; under bf16 both round the same operands, so
// they differ by the order of f32 sums alone.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "compute/cpu/bf16_products.hpp"
#include "compute/cpu/cpu_backend.hpp"

namespace {

using namespace troupe::compute;

Tensor random_tensor(Shape shape, DType dtype, std::mt19937& rng) {
  Tensor t = Tensor::zeros(std::move(shape), dtype);
  std::uniform_real_distribution<double> uniform(-1.0, 1.0);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    if (dtype == DType::f64)
      t.data_as<double>()[i] = uniform(rng);
    else
      t.data_as<float>()[i] = static_cast<float>(uniform(rng));
  }
  return t;
}

double at(const Tensor& t, std::int64_t i) {
  return t.dtype() == DType::f64 ? t.data_as<double>()[i] : t.data_as<float>()[i];
}

// The largest difference between a and b over the largest |b|.
double relative_difference(const Tensor& a, const Tensor& b) {
  REQUIRE(a.numel() == b.numel());
  double diff = 0, scale = 0;
  for (std::int64_t i = 0; i < a.numel(); ++i) {
    diff = std::max(diff, std::abs(at(a, i) - at(b, i)));
    scale = std::max(scale, std::abs(at(b, i)));
  }
  return scale == 0 ? diff : diff / scale;
}

Tensor copy_of(const Tensor& t) {
  Tensor c = Tensor::zeros(t.shape(), t.dtype());
  std::copy_n(static_cast<const std::byte*>(t.data()), t.nbytes(), static_cast<std::byte*>(c.data()));
  return c;
}

// Sums of products of up to 80 terms of [-1, 1]: f64 rounds at 1e-16 of them, f32 at 6e-8.
double dtype_tolerance(DType dtype) { return dtype == DType::f64 ? 1e-13 : 2e-6; }

struct Setting {
  DType dtype;
  Precision precision;
  cpu::Bf16Units units;
  std::string name() const {
    if (precision == Precision::fp32) return std::string(dtype_name(dtype));
    return units == cpu::Bf16Units::hardware ? "bf16 on BF16 units" : "bf16 emulated";
  }
};

std::vector<Setting> settings() {
  std::vector<Setting> all{{DType::f64, Precision::fp32, cpu::Bf16Units::emulated},
                           {DType::f32, Precision::fp32, cpu::Bf16Units::emulated},
                           {DType::f32, Precision::bf16, cpu::Bf16Units::emulated}};
  if (cpu::bf16_units_present()) all.push_back({DType::f32, Precision::bf16, cpu::Bf16Units::hardware});
  return all;
}

}  // namespace

TEST_CASE("grouped products equal one product per expert, on teams of 1 to 3 threads", "[compute][cpu][moe]") {
  const std::vector<std::vector<std::int64_t>> counts = {
      {50, 3, 0, 77, 1},  // uneven, an expert with none, one with a single row
      {0, 0, 64, 0, 0},   // every row on one expert
      {5, 5, 5, 5, 5},
  };
  constexpr int E = 5, C = 24, OC = 40;
  for (const Setting& setting : settings())
    for (int threads : {1, 2, 3})
      for (const auto& rows_of : counts)
        for (bool with_bias : {true, false}) {
          CAPTURE(setting.name(), threads, rows_of, with_bias);
          const DType dtype = setting.dtype;
          const std::int64_t N = std::accumulate(rows_of.begin(), rows_of.end(), std::int64_t{0});
          std::mt19937 rng(17);
          CpuBackend be(threads, setting.precision, setting.units);
          const Tensor inp = random_tensor({N, C}, dtype, rng), weight = random_tensor({E, OC, C}, dtype, rng);
          const Tensor bias = with_bias ? random_tensor({E, OC}, dtype, rng) : Tensor{};
          const Tensor dout = random_tensor({N, OC}, dtype, rng);

          Tensor out = Tensor::zeros({N, OC}, dtype), expected_out = Tensor::zeros({N, OC}, dtype);
          be.grouped_matmul_forward(out, inp, weight, bias, rows_of);
          be.Backend::grouped_matmul_forward(expected_out, inp, weight, bias, rows_of);
          CHECK(relative_difference(out, expected_out) <= dtype_tolerance(dtype));

          Tensor dinp = Tensor::zeros({N, C}, dtype), expected_dinp = Tensor::zeros({N, C}, dtype);
          be.grouped_matmul_backward_input(dinp, dout, weight, rows_of);
          be.Backend::grouped_matmul_backward_input(expected_dinp, dout, weight, rows_of);
          CHECK(relative_difference(dinp, expected_dinp) <= dtype_tolerance(dtype));

          // The weight gradients accumulate: onto the same random start in both.
          Tensor dweight = random_tensor({E, OC, C}, dtype, rng), expected_dweight = copy_of(dweight);
          Tensor dbias = with_bias ? random_tensor({E, OC}, dtype, rng) : Tensor{};
          Tensor expected_dbias = with_bias ? copy_of(dbias) : Tensor{};
          be.grouped_matmul_backward_weights(dweight, dbias, dout, inp, rows_of);
          be.Backend::grouped_matmul_backward_weights(expected_dweight, expected_dbias, dout, inp, rows_of);
          CHECK(relative_difference(dweight, expected_dweight) <= dtype_tolerance(dtype));
          // Each bias gradient is a column sum in row order in both.
          if (with_bias) CHECK(relative_difference(dbias, expected_dbias) == 0);
        }
}

TEST_CASE("grouped products refuse counts that do not match their tensors", "[compute][cpu][moe]") {
  std::mt19937 rng(5);
  CpuBackend be(2);
  const Tensor inp = random_tensor({10, 8}, DType::f32, rng), weight = random_tensor({3, 6, 8}, DType::f32, rng);
  Tensor out = Tensor::zeros({10, 6}, DType::f32);
  const std::vector<std::int64_t> too_few{4, 4, 1}, two_counts{5, 5}, negative{12, -2, 0};
  CHECK_THROWS_WITH(be.grouped_matmul_forward(out, inp, weight, Tensor{}, too_few),
                    Catch::Contains("grouped_matmul_forward"));
  CHECK_THROWS_WITH(be.grouped_matmul_forward(out, inp, weight, Tensor{}, two_counts),
                    Catch::Contains("2 row counts for 3 experts"));
  CHECK_THROWS_WITH(be.grouped_matmul_forward(out, inp, weight, Tensor{}, negative), Catch::Contains("negative"));
  const Tensor flat_weight = random_tensor({18, 8}, DType::f32, rng);
  const std::vector<std::int64_t> fits{4, 4, 2};
  CHECK_THROWS_WITH(be.grouped_matmul_forward(out, inp, flat_weight, Tensor{}, fits),
                    Catch::Contains("is not (E, OC, C)"));
}
