// The plain elementwise passes: residual add, in-place scale, and the sum of squares the
// gradient-norm clip needs. The sum is accumulated in double whatever the input dtype, so the
// norm of ~1e8 float gradients keeps its digits; the SIMD reduction order is fixed by the
// compiled loop, so it is deterministic on a given machine.

#include "compute/cpu/kernels.hpp"
#include "compute/cpu/vector_math.hpp"

namespace troupe::compute::cpu {

template <typename Real>
TROUPE_SIMD_CLONES void residual_forward(Real* out, const Real* a, const Real* b, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

template <typename Real>
TROUPE_SIMD_CLONES void scale(Real* x, std::int64_t n, Real factor) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) x[i] *= factor;
}

template <typename Real>
TROUPE_SIMD_CLONES double sum_of_squares(const Real* x, std::int64_t n) {
  double sum = 0;
#pragma omp simd reduction(+ : sum)
  for (std::int64_t i = 0; i < n; ++i) {
    const double xi = x[i];
    sum += xi * xi;
  }
  return sum;
}

template void residual_forward<float>(float*, const float*, const float*, std::int64_t);
template void residual_forward<double>(double*, const double*, const double*, std::int64_t);
template void scale<float>(float*, std::int64_t, float);
template void scale<double>(double*, std::int64_t, double);
template double sum_of_squares<float>(const float*, std::int64_t);
template double sum_of_squares<double>(const double*, std::int64_t);

}  // namespace troupe::compute::cpu
