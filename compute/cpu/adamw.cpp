// AdamW with decoupled weight decay, one fused sweep per segment over param, grad, m and v (the
// update is memory-bound, so each array is read and written once). Moments live in the
// parameter's dtype and the arithmetic runs in it too: float for training, double in the
// checks. The bias corrections 1 - beta^t are computed once per call in double. vsqrt
// (vector_math.hpp) keeps the loop vectorized.
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g²
//   p -= lr (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd p)

#include <cmath>

#include "compute/cpu/kernels.hpp"
#include "compute/cpu/vector_math.hpp"

namespace troupe::compute::cpu {
namespace {

template <typename Real>
struct StepConstants {
  Real lr, b1, b2, eps, correction1, correction2;
};

template <typename Real>
StepConstants<Real> step_constants(const AdamWHyper& hyper) {
  const auto step = static_cast<double>(hyper.step);
  return {hyper.lr,
          hyper.beta1,
          hyper.beta2,
          hyper.eps,
          static_cast<Real>(1.0 - std::pow(static_cast<double>(hyper.beta1), step)),
          static_cast<Real>(1.0 - std::pow(static_cast<double>(hyper.beta2), step))};
}

// One contiguous segment. Every element is computed alone in this fixed order, so a segment's
// result does not depend on which call or which other segments it came with.
template <typename Real>
TROUPE_SIMD_CLONES void update_segment(Real* param, const Real* grad, Real* m, Real* v, std::int64_t n,
                                       StepConstants<Real> k, Real wd) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const Real g = grad[i];
    const Real mi = k.b1 * m[i] + (Real(1) - k.b1) * g;
    const Real vi = k.b2 * v[i] + (Real(1) - k.b2) * g * g;
    m[i] = mi;
    v[i] = vi;
    const Real m_hat = mi / k.correction1;
    const Real v_hat = vi / k.correction2;
    param[i] -= k.lr * (m_hat / (vsqrt(v_hat) + k.eps) + wd * param[i]);
  }
}

}  // namespace

template <typename Real>
void adamw_update(Real* params, const Real* grads, Real* m, Real* v, std::span<const AdamWSegment> segments,
                  const AdamWHyper& hyper) {
  const StepConstants<Real> constants = step_constants<Real>(hyper);
  const Real decay = hyper.weight_decay;
  for (const AdamWSegment& s : segments)
    update_segment(params + s.param_offset, grads + s.param_offset, m + s.moment_offset, v + s.moment_offset, s.count,
                   constants, s.decay ? decay : Real(0));
}

template void adamw_update<float>(float*, const float*, float*, float*, std::span<const AdamWSegment>,
                                  const AdamWHyper&);
template void adamw_update<double>(double*, const double*, double*, double*, std::span<const AdamWSegment>,
                                   const AdamWHyper&);

}  // namespace troupe::compute::cpu
