// AdamW with decoupled weight decay, one fused sweep over param, grad, m and v (the update is
// memory-bound, so each array is read and written once). Moments live in the parameter's
// dtype and the arithmetic runs in it too: float for training, double in the checks. The bias
// corrections 1 - beta^t are computed once per call in double. vsqrt (vector_math.hpp) keeps
// the loop vectorized.
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g²
//   p -= lr (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd p)

#include <cmath>

#include "compute/cpu/kernels.hpp"
#include "compute/cpu/vector_math.hpp"

namespace troupe::compute::cpu {

template <typename Real>
TROUPE_SIMD_CLONES void adamw_update(Real* param, const Real* grad, Real* m, Real* v, std::int64_t n,
                                     const AdamWHyper& hyper) {
  const Real lr = hyper.lr;
  const Real b1 = hyper.beta1;
  const Real b2 = hyper.beta2;
  const Real eps = hyper.eps;
  const Real wd = hyper.weight_decay;
  const auto step = static_cast<double>(hyper.step);
  const Real correction1 = static_cast<Real>(1.0 - std::pow(static_cast<double>(hyper.beta1), step));
  const Real correction2 = static_cast<Real>(1.0 - std::pow(static_cast<double>(hyper.beta2), step));
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const Real g = grad[i];
    const Real mi = b1 * m[i] + (Real(1) - b1) * g;
    const Real vi = b2 * v[i] + (Real(1) - b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const Real m_hat = mi / correction1;
    const Real v_hat = vi / correction2;
    param[i] -= lr * (m_hat / (vsqrt(v_hat) + eps) + wd * param[i]);
  }
}

template void adamw_update<float>(float*, const float*, float*, float*, std::int64_t, const AdamWHyper&);
template void adamw_update<double>(double*, const double*, double*, double*, std::int64_t, const AdamWHyper&);

}  // namespace troupe::compute::cpu
