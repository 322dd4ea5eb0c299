#pragma once
// Host copies and bit-for-bit comparison of tensors, for the tests that pin a computation as
// exactly equal to another (same ops, same order), and the worst relative difference of a
// buffer's parameters, for those that pin it within a tolerance.

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "compute/backend.hpp"
#include "compute/model/parameter_layout.hpp"
#include "compute/tensor.hpp"

namespace troupe::test {

// `t` copied to a host tensor of its shape and dtype.
inline compute::Tensor host_copy(compute::Backend& backend, const compute::Tensor& t) {
  compute::Tensor copy = compute::Tensor::zeros(t.shape(), t.dtype());
  backend.copy(copy, t);
  return copy;
}

// Same dtype, same size, same bytes (host tensors).
inline bool bitwise_equal(const compute::Tensor& a, const compute::Tensor& b) {
  return a.dtype() == b.dtype() && a.nbytes() == b.nbytes() && std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

// The largest, over `views`, of |local - expected| / |expected| as vector norms (|local - expected|
// where expected is 0), naming the worst view in `worst_name`; `expected` in the local buffer's order.
template <typename Real>
double worst_relative(const compute::Tensor& local, const std::vector<double>& expected,
                      const std::vector<compute::ParameterView>& views, std::string& worst_name) {
  double worst = 0;
  for (const compute::ParameterView& v : views) {
    double diff = 0, norm = 0;
    for (std::int64_t i = v.offset; i < v.offset + v.numel(); ++i) {
      const double a = local.data_as<Real>()[i], b = expected[static_cast<std::size_t>(i)];
      diff += (a - b) * (a - b);
      norm += b * b;
    }
    const double rel = norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
    if (rel > worst) {
      worst = rel;
      worst_name = v.name;
    }
  }
  return worst;
}

}  // namespace troupe::test
