#pragma once
// Random tensors for the kernel and layer tests, drawn from a generator the test seeds.

#include <cstdint>
#include <random>
#include <utility>

#include "compute/tensor.hpp"

namespace troupe::test {

// Normal(mean, scale) values drawn in double, as `dtype` (f64, or f32 rounded from the draws).
inline compute::Tensor normal_tensor(compute::Shape shape, std::mt19937& rng, double scale = 1.0, double mean = 0.0,
                                     compute::DType dtype = compute::DType::f64) {
  compute::Tensor t = compute::Tensor::zeros(std::move(shape), dtype);
  std::normal_distribution<double> dist(mean, scale);
  for (std::int64_t i = 0; i < t.numel(); ++i) {
    const double x = dist(rng);
    if (dtype == compute::DType::f64)
      t.data_as<double>()[i] = x;
    else
      t.data_as<float>()[i] = static_cast<float>(x);
  }
  return t;
}

// f32 values uniform in [-scale, scale], drawn in float.
inline compute::Tensor uniform_f32(compute::Shape shape, std::mt19937& rng, float scale = 1.0f) {
  compute::Tensor t = compute::Tensor::zeros(std::move(shape), compute::DType::f32);
  std::uniform_real_distribution<float> uniform(-scale, scale);
  for (std::int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = uniform(rng);
  return t;
}

}  // namespace troupe::test
