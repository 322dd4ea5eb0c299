// Token + position embedding. The backward scatters into dwte row by row in (b, t) order,
// never in parallel, so tokens that repeat accumulate in a fixed order (deterministic).

#include <cstddef>

#include "compute/cpu/kernels.hpp"
#include "compute/cpu/vector_math.hpp"

namespace troupe::compute::cpu {

template <typename Real>
TROUPE_SIMD_CLONES void encoder_forward(Real* out, const std::int32_t* tokens, const Real* wte, const Real* wpe, int B,
                                        int T, int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      Real* o = out + (static_cast<std::size_t>(b) * T + t) * C;
      const Real* w = wte + static_cast<std::size_t>(tokens[b * T + t]) * C;
      const Real* p = wpe + static_cast<std::size_t>(t) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) o[c] = w[c] + p[c];
    }
  }
}

template <typename Real>
TROUPE_SIMD_CLONES void encoder_backward(Real* dwte, Real* dwpe, const Real* dout, const std::int32_t* tokens, int B,
                                         int T, int C) {
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T; ++t) {
      const Real* d = dout + (static_cast<std::size_t>(b) * T + t) * C;
      Real* dw = dwte + static_cast<std::size_t>(tokens[b * T + t]) * C;
      Real* dp = dwpe + static_cast<std::size_t>(t) * C;
#pragma omp simd
      for (int c = 0; c < C; ++c) {
        dw[c] += d[c];
        dp[c] += d[c];
      }
    }
  }
}

template void encoder_forward<float>(float*, const std::int32_t*, const float*, const float*, int, int, int);
template void encoder_forward<double>(double*, const std::int32_t*, const double*, const double*, int, int, int);
template void encoder_backward<float>(float*, float*, const float*, const std::int32_t*, int, int, int);
template void encoder_backward<double>(double*, double*, const double*, const std::int32_t*, int, int, int);

}  // namespace troupe::compute::cpu
