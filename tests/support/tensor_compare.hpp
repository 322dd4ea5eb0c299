#pragma once
// Host copies and bit-for-bit comparison of tensors, for the tests that pin a computation as
// exactly equal to another (same ops, same order).

#include <cstring>

#include "compute/backend.hpp"
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

}  // namespace troupe::test
