// Softmax cross-entropy over the first V of Vp logit columns, fused per row. The loss is taken
// as log(sum) - (logit[target] - max) rather than -log(probs[target]), which is the same
// number but stays finite when the target's probability underflows. Padded columns get
// probability 0, and therefore gradient 0 in the backward without a special case.

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "compute/cpu/kernels.hpp"
#include "compute/cpu/softmax_row.hpp"
#include "compute/cpu/vector_math.hpp"

namespace troupe::compute::cpu {

template <typename Real>
TROUPE_SIMD_CLONES void crossentropy_forward(Real* losses, Real* probs, const Real* logits, const std::int32_t* targets,
                                             std::int64_t N, int V, int Vp) {
  for (std::int64_t i = 0; i < N; ++i) {
    const Real* x = logits + static_cast<std::size_t>(i) * Vp;
    Real* p = probs + static_cast<std::size_t>(i) * Vp;
    const Real max = row_max(x, V);
    const Real target_shifted = x[targets[i]] - max;  // read before probs (which may be logits) is written
    const Real sum = softmax_row(p, x, V, max);
    std::fill(p + V, p + Vp, Real(0));
    losses[i] = std::log(sum) - target_shifted;
  }
}

template <typename Real>
TROUPE_SIMD_CLONES void crossentropy_backward(Real* dlogits, const Real* probs, const std::int32_t* targets, Real dloss,
                                              std::int64_t N, int Vp) {
  for (std::int64_t i = 0; i < N; ++i) {
    const Real* p = probs + static_cast<std::size_t>(i) * Vp;
    Real* d = dlogits + static_cast<std::size_t>(i) * Vp;
#pragma omp simd
    for (int j = 0; j < Vp; ++j) d[j] = p[j] * dloss;
    d[targets[i]] -= dloss;
  }
}

template void crossentropy_forward<float>(float*, float*, const float*, const std::int32_t*, std::int64_t, int, int);
template void crossentropy_forward<double>(double*, double*, const double*, const std::int32_t*, std::int64_t, int,
                                           int);
template void crossentropy_backward<float>(float*, const float*, const std::int32_t*, float, std::int64_t, int);
template void crossentropy_backward<double>(double*, const double*, const std::int32_t*, double, std::int64_t, int);

}  // namespace troupe::compute::cpu
