// Backend::adamw_update over a segment list, on the CPU backend: one call over several segments
// equals one call per segment bit for bit (so multi-tensor batching cannot change a training run),
// elements outside every segment stay as they were, and segment lists that reach outside the
// buffers or update an element twice are refused (compute/backend_checks.cpp, which the CUDA
// backend runs too) before anything is written.

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "support/tensor_compare.hpp"
#include "compute/cpu/cpu_backend.hpp"

using namespace troupe::compute;
using troupe::test::bitwise_equal;

namespace {

Tensor random_buffer(std::int64_t n, DType dtype, std::mt19937& rng, double scale) {
  std::normal_distribution<double> dist(0.0, scale);
  Tensor t = Tensor::zeros({n}, dtype);
  for (std::int64_t i = 0; i < n; ++i) {
    if (dtype == DType::f32) {
      t.data_as<float>()[i] = static_cast<float>(dist(rng));
    } else {
      t.data_as<double>()[i] = dist(rng);
    }
  }
  return t;
}

Tensor copy_of(const Tensor& t) {
  Tensor c = Tensor::zeros(t.shape(), t.dtype());
  std::memcpy(c.data(), t.data(), t.nbytes());
  return c;
}

// Elements [offset, offset + count) of a and b, bit for bit.
bool bitwise_equal(const Tensor& a, const Tensor& b, std::int64_t offset, std::int64_t count) {
  return troupe::test::bitwise_equal(a.slice(offset, {count}), b.slice(offset, {count}));
}

AdamWHyper hyper_at(long step) {
  AdamWHyper hyper;
  hyper.lr = 6e-4f;
  hyper.weight_decay = 0.1f;
  hyper.step = step;
  return hyper;
}

}  // namespace

TEST_CASE("adamw over several segments in one call equals one call per segment, bit for bit", "[kernels]") {
  CpuBackend backend(1);
  const DType dtype = GENERATE(DType::f32, DType::f64);
  std::mt19937 rng(41);
  constexpr std::int64_t kParams = 2000, kMoments = 1500;
  // Listed out of order, with gaps in both buffers, decayed and not, lengths that are no
  // multiple of any vector width; moments packed differently from the parameters.
  const std::vector<AdamWSegment> segments = {
      {1200, 900, 517, true}, {3, 0, 37, true}, {40, 37, 1, false}, {50, 40, 768, true}, {900, 810, 90, false},
  };
  const Tensor params0 = random_buffer(kParams, dtype, rng, 1.0);
  const Tensor m0 = random_buffer(kMoments, dtype, rng, 0.01);
  Tensor v0 = random_buffer(kMoments, dtype, rng, 0.01);
  backend.scale(v0, 0.0f);  // second moments start at zero, as AdamW's do

  Tensor params = copy_of(params0), m = copy_of(m0), v = copy_of(v0);
  Tensor params_each = copy_of(params0), m_each = copy_of(m0), v_each = copy_of(v0);
  for (long step = 1; step <= 3; ++step) {
    const Tensor grads = random_buffer(kParams, dtype, rng, 0.1);
    backend.adamw_update(params, grads, m, v, segments, hyper_at(step));
    for (const AdamWSegment& s : segments) {
      Tensor p = params_each.slice(s.param_offset, {s.count}), g = grads.slice(s.param_offset, {s.count});
      Tensor ms = m_each.slice(s.moment_offset, {s.count}), vs = v_each.slice(s.moment_offset, {s.count});
      const AdamWSegment whole{0, 0, s.count, s.decay};
      backend.adamw_update(p, g, ms, vs, {&whole, 1}, hyper_at(step));
    }
  }
  INFO(dtype_name(dtype));
  CHECK(bitwise_equal(params, params_each));
  CHECK(bitwise_equal(m, m_each));
  CHECK(bitwise_equal(v, v_each));
  // Every segment moved; the gaps between them did not.
  for (const AdamWSegment& s : segments) CHECK_FALSE(bitwise_equal(params, params0, s.param_offset, s.count));
  CHECK(bitwise_equal(params, params0, 0, 3));
  CHECK(bitwise_equal(params, params0, 41, 9));
  CHECK(bitwise_equal(params, params0, 818, 82));
  CHECK(bitwise_equal(params, params0, 990, 210));
  CHECK(bitwise_equal(params, params0, 1717, kParams - 1717));
  CHECK(bitwise_equal(m, m0, 808, 2));
  CHECK(bitwise_equal(v, v0, 1417, kMoments - 1417));
}

TEST_CASE("adamw decays only the segments marked to decay", "[kernels]") {
  CpuBackend backend(1);
  Tensor params = Tensor::zeros({8}, DType::f32), grads = Tensor::zeros({8}, DType::f32);
  Tensor m = Tensor::zeros({8}, DType::f32), v = Tensor::zeros({8}, DType::f32);
  for (int i = 0; i < 8; ++i) params.data_as<float>()[i] = 1.0f;
  const std::vector<AdamWSegment> segments = {{0, 0, 4, true}, {4, 4, 4, false}};
  AdamWHyper hyper = hyper_at(1);
  hyper.lr = 0.1f;
  hyper.weight_decay = 0.5f;
  backend.adamw_update(params, grads, m, v, segments, hyper);  // zero gradients: only decay moves p
  for (int i = 0; i < 4; ++i) CHECK(params.data_as<float>()[i] == Approx(0.95f));
  for (int i = 4; i < 8; ++i) CHECK(params.data_as<float>()[i] == 1.0f);
}

TEST_CASE("adamw refuses segments outside the buffers, empty or overlapping, before writing", "[kernels]") {
  using Catch::Contains;
  CpuBackend backend(1);
  std::mt19937 rng(42);
  Tensor params = random_buffer(100, DType::f32, rng, 1.0), grads = random_buffer(100, DType::f32, rng, 1.0);
  Tensor m = Tensor::zeros({60}, DType::f32), v = Tensor::zeros({60}, DType::f32);
  const Tensor params0 = copy_of(params), zeros = Tensor::zeros({60}, DType::f32);
  const AdamWSegment good{0, 0, 10, true};
  auto outcome = [](auto&& call) -> std::string {
    try {
      call();
    } catch (const std::logic_error& e) {
      return e.what();
    }
    return "accepted";
  };
  // A valid segment comes first, so a refusal after any writing would show in params.
  auto with_segments = [&](std::vector<AdamWSegment> segments) {
    segments.insert(segments.begin(), good);
    return outcome([&] { backend.adamw_update(params, grads, m, v, segments, hyper_at(1)); });
  };
  constexpr std::int64_t kHuge = std::numeric_limits<std::int64_t>::max() - 5;

  CHECK_THAT(with_segments({{20, 20, 0, true}}),
             Contains("adamw_update: segment 1 (0 elements at param offset 20") && Contains("needs a positive count"));
  CHECK_THAT(with_segments({{20, 20, -3, true}}), Contains("needs a positive count"));
  CHECK_THAT(with_segments({{95, 20, 6, true}}), Contains("reaches outside params f32[100]"));
  CHECK_THAT(with_segments({{-1, 20, 5, true}}), Contains("reaches outside params"));
  CHECK_THAT(with_segments({{kHuge, 20, 10, true}}), Contains("reaches outside params"));  // no overflow
  CHECK_THAT(with_segments({{20, 55, 6, true}}), Contains("reaches outside the moments f32[60]"));
  CHECK_THAT(with_segments({{20, -1, 5, true}}), Contains("reaches outside the moments"));
  CHECK_THAT(with_segments({{30, 20, 10, true}, {9, 40, 5, false}}),
             Contains("segment 0 (10 elements at param offset 0, moment offset 0) and segment 2") &&
                 Contains("overlap in params"));
  CHECK_THAT(with_segments({{30, 20, 10, true}, {50, 25, 5, false}}), Contains("overlap in the moments"));
  CHECK_THAT(outcome([&] {
               backend.adamw_update(params, Tensor::zeros({99}, DType::f32), m, v, {&good, 1}, hyper_at(1));
             }),
             Contains("f32[99] on cpu vs f32[100] on cpu"));
  Tensor v_longer = Tensor::zeros({61}, DType::f32), v_f64 = Tensor::zeros({60}, DType::f64);
  CHECK_THAT(outcome([&] {
               backend.adamw_update(params, grads, m, v_longer, {&good, 1}, hyper_at(1));
             }),
             Contains("f32[61] on cpu vs f32[60] on cpu"));
  CHECK_THAT(outcome([&] {
               backend.adamw_update(params, grads, m, v_f64, {&good, 1}, hyper_at(1));
             }),
             Contains("expected f32"));
  CHECK_THAT(outcome([&] {
               backend.adamw_update(params, grads, m, v, {&good, 1}, hyper_at(0));
             }),
             Contains("step 0 is not 1-based"));
  CHECK(bitwise_equal(params, params0));
  CHECK(bitwise_equal(m, zeros));
  CHECK(bitwise_equal(v, zeros));

  CHECK(with_segments({{30, 20, 10, true}, {40, 30, 5, false}}) == "accepted");  // touching is not overlapping
  CHECK(with_segments({}) == "accepted");
  CHECK(outcome([&] { backend.adamw_update(params, grads, m, v, {}, hyper_at(1)); }) == "accepted");
}
