#pragma once
// One row of softmax for the cross-entropy loss: the row's max (causal attention's online softmax
// takes it too), then p = exp(x - max) / sum in two passes. It is split in two so a caller can read what it still needs
// from x between them (cross-entropy keeps its target logit), because p may be x itself.
//
// Both are always_inline: callers are TROUPE_SIMD_CLONES functions, and each clone must get its
// own copy of these loops vectorized for its ISA. An out-of-line helper would be compiled once,
// for the baseline ISA only.

#include "compute/cpu/vector_math.hpp"

namespace troupe::compute::cpu {

// max of x[0..n), n >= 1.
template <typename Real>
[[gnu::always_inline]] inline Real row_max(const Real* x, int n) {
  Real max = x[0];
#pragma omp simd reduction(max : max)
  for (int j = 0; j < n; ++j) max = x[j] > max ? x[j] : max;
  return max;
}

// e[j] = exp(x[j] - max) over j < n; returns their sum. e may be x (the online softmax of causal
// attention rescales the sums itself).
template <typename Real>
[[gnu::always_inline]] inline Real exp_shifted_row(Real* e, const Real* x, int n, Real max) {
  Real sum = 0;
#pragma omp simd reduction(+ : sum)
  for (int j = 0; j < n; ++j) {
    const Real v = vexp(x[j] - max);
    e[j] = v;
    sum += v;
  }
  return sum;
}

// p[j] = exp(x[j] - max) / sum over j < n, given max = row_max(x, n); returns the sum. p may be x.
template <typename Real>
[[gnu::always_inline]] inline Real softmax_row(Real* p, const Real* x, int n, Real max) {
  const Real sum = exp_shifted_row(p, x, n, max);
  const Real inv = Real(1) / sum;
#pragma omp simd
  for (int j = 0; j < n; ++j) p[j] *= inv;
  return sum;
}

}  // namespace troupe::compute::cpu
