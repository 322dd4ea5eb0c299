// LayerNorm over the last axis, eps 1e-5, biased variance (as PyTorch and GPT-2). The variance
// is taken in a second pass around the mean rather than as E[x²] - E[x]², which loses digits
// in float when the mean is large against the spread. mean and rstd are saved per row so the
// backward needs no recomputation of the statistics.
//
// Backward (per row, with n = (x - mean) * rstd and g = weight * dout):
//   dinp += rstd * (g - mean(g) - n * mean(g * n))
//   dweight += sum over rows of n * dout;  dbias += sum over rows of dout
// dinp accumulates because a LayerNorm's input is the residual stream (see backend.hpp).

#include <cmath>
#include <cstddef>

#include "compute/cpu/cpu_kernels.hpp"
#include "compute/cpu/vector_math.hpp"

namespace troupe::compute::cpu {

template <typename Real>
TROUPE_SIMD_CLONES void layernorm_forward(Real* out, Real* mean, Real* rstd, const Real* inp, const Real* weight,
                                          const Real* bias, std::int64_t N, int C) {
  constexpr Real eps = Real(1e-5);
  for (std::int64_t i = 0; i < N; ++i) {
    const Real* x = inp + static_cast<std::size_t>(i) * C;
    Real* o = out + static_cast<std::size_t>(i) * C;
    Real sum = 0;
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; ++c) sum += x[c];
    const Real m = sum / C;
    Real sq = 0;
#pragma omp simd reduction(+ : sq)
    for (int c = 0; c < C; ++c) sq += (x[c] - m) * (x[c] - m);
    const Real s = Real(1) / std::sqrt(sq / C + eps);
#pragma omp simd
    for (int c = 0; c < C; ++c) o[c] = (x[c] - m) * s * weight[c] + bias[c];
    mean[i] = m;
    rstd[i] = s;
  }
}

template <typename Real>
TROUPE_SIMD_CLONES void layernorm_backward_input(Real* dinp, const Real* dout, const Real* inp, const Real* weight,
                                                 const Real* mean, const Real* rstd, std::int64_t N, int C) {
  for (std::int64_t i = 0; i < N; ++i) {
    const Real* x = inp + static_cast<std::size_t>(i) * C;
    const Real* d = dout + static_cast<std::size_t>(i) * C;
    Real* dx = dinp + static_cast<std::size_t>(i) * C;
    const Real m = mean[i];
    const Real s = rstd[i];
    Real g_sum = 0;
    Real gn_sum = 0;
#pragma omp simd reduction(+ : g_sum, gn_sum)
    for (int c = 0; c < C; ++c) {
      const Real g = weight[c] * d[c];
      g_sum += g;
      gn_sum += g * (x[c] - m) * s;
    }
    const Real g_mean = g_sum / C;
    const Real gn_mean = gn_sum / C;
#pragma omp simd
    for (int c = 0; c < C; ++c) {
      const Real n = (x[c] - m) * s;
      dx[c] += s * (weight[c] * d[c] - g_mean - n * gn_mean);
    }
  }
}

template <typename Real>
TROUPE_SIMD_CLONES void layernorm_backward_params(Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                                                  const Real* mean, const Real* rstd, std::int64_t N, int width,
                                                  int ld) {
  for (std::int64_t i = 0; i < N; ++i) {
    const Real* x = inp + static_cast<std::size_t>(i) * ld;
    const Real* d = dout + static_cast<std::size_t>(i) * ld;
    const Real m = mean[i];
    const Real s = rstd[i];
#pragma omp simd
    for (int c = 0; c < width; ++c) {
      dbias[c] += d[c];
      dweight[c] += (x[c] - m) * s * d[c];
    }
  }
}

template void layernorm_forward<float>(float*, float*, float*, const float*, const float*, const float*, std::int64_t,
                                       int);
template void layernorm_forward<double>(double*, double*, double*, const double*, const double*, const double*,
                                        std::int64_t, int);
template void layernorm_backward_input<float>(float*, const float*, const float*, const float*, const float*,
                                              const float*, std::int64_t, int);
template void layernorm_backward_input<double>(double*, const double*, const double*, const double*, const double*,
                                               const double*, std::int64_t, int);
template void layernorm_backward_params<float>(float*, float*, const float*, const float*, const float*, const float*,
                                               std::int64_t, int, int);
template void layernorm_backward_params<double>(double*, double*, const double*, const double*, const double*,
                                                const double*, std::int64_t, int, int);

}  // namespace troupe::compute::cpu
