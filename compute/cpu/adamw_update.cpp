// AdamW with decoupled weight decay, one fused sweep per segment over param, grad, m and v (the
// update is memory-bound, so each array is read and written once). Moments live in the
// parameter's dtype and the arithmetic runs in it too: float for training, double in the
// checks. The bias corrections 1 - beta^t are computed once per call in double. vsqrt
// (vector_math.hpp) keeps the loop vectorized.
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g²
//   p -= lr (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd p)

#include <algorithm>
#include <cmath>

#include "compute/cpu/cpu_kernels.hpp"
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

constexpr std::int64_t range_alignment = 64;

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
                  const AdamWHyper& hyper, std::int64_t begin, std::int64_t end) {
  const StepConstants<Real> constants = step_constants<Real>(hyper);
  const Real decay = hyper.weight_decay;
  std::int64_t segment_start = 0;
  for (const AdamWSegment& s : segments) {
    // A bound inside a segment moves up to a multiple of range_alignment from the segment's start
    // (both neighbouring ranges move it alike), so each element meets the same vector lanes,
    // and so the same rounding, as in one sweep of the whole segment.
    auto local = [&](std::int64_t bound) {
      const std::int64_t offset = std::clamp(bound - segment_start, std::int64_t{0}, s.count);
      return std::min(s.count, (offset + range_alignment - 1) / range_alignment * range_alignment);
    };
    const std::int64_t from = local(begin), to = local(end);
    segment_start += s.count;
    if (from >= to) continue;
    update_segment(params + s.param_offset + from, grads + s.param_offset + from, m + s.moment_offset + from,
                   v + s.moment_offset + from, to - from, constants, s.decay ? decay : Real(0));
  }
}

std::int64_t adamw_elements(std::span<const AdamWSegment> segments) {
  std::int64_t n = 0;
  for (const AdamWSegment& s : segments) n += s.count;
  return n;
}

template void adamw_update<float>(float*, const float*, float*, float*, std::span<const AdamWSegment>,
                                  const AdamWHyper&, std::int64_t, std::int64_t);
template void adamw_update<double>(double*, const double*, double*, double*, std::span<const AdamWSegment>,
                                   const AdamWHyper&, std::int64_t, std::int64_t);

}  // namespace troupe::compute::cpu
