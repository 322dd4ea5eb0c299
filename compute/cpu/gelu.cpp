// GELU, tanh approximation (GPT-2's): 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x³).
// It is computed through the identity 0.5 (1 + tanh(u)) = s = 1 / (1 + exp(-2u)), so each
// element costs one vexp and one division, and there is no cancellation in 1 + tanh(u) for
// negative x. The derivative in the same terms, with 1 - s taken as e s (e = exp(-2u)) since
// 1 - s cancels to nothing for large x:
//   d/dx [x s] = s + 2 x s (1 - s) u',   u' = sqrt(2/pi) (1 + 3 * 0.044715 x²).

#include <cstddef>

#include "compute/cpu/cpu_kernels.hpp"
#include "compute/cpu/vector_math.hpp"
#include "compute/cuda/bf16.hpp"

namespace troupe::compute::cpu {
namespace {

template <typename Real>
constexpr Real sqrt_2_over_pi = Real(0.79788456080286535588);
template <typename Real>
constexpr Real cubic = Real(0.044715);

// d/dx GELU(x), as above.
template <typename Real>
[[gnu::always_inline]] inline Real gelu_slope(Real x) {
  const Real x2 = x * x;
  const Real u = sqrt_2_over_pi<Real> * (x + cubic<Real> * x2 * x);
  const Real du = sqrt_2_over_pi<Real> * (Real(1) + Real(3) * cubic<Real> * x2);
  const Real e = vexp(Real(-2) * u);
  const Real s = Real(1) / (Real(1) + e);
  return s + Real(2) * x * s * (e * s) * du;
}

}  // namespace

// An input as the kernels read it: itself, or a bf16 value (its bits) widened to f32.
template <typename Real>
Real widened(Real x) {
  return x;
}
inline float widened(std::uint16_t bits) { return bf16_bits_to_float(bits); }

template <typename Real, typename In>
TROUPE_SIMD_CLONES void gelu_forward(Real* out, const In* inp, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) {
    const Real x = widened(inp[i]);
    const Real u = sqrt_2_over_pi<Real> * (x + cubic<Real> * x * x * x);
    out[i] = x / (Real(1) + vexp(Real(-2) * u));
  }
}

template <typename Real>
TROUPE_SIMD_CLONES void gelu_backward(Real* dinp, const Real* inp, const Real* dout, std::int64_t n) {
#pragma omp simd
  for (std::int64_t i = 0; i < n; ++i) dinp[i] = dout[i] * gelu_slope(inp[i]);
}

template <typename Real, typename In>
TROUPE_SIMD_CLONES void gelu_bias_backward(Real* dinp, Real* dbias, const In* inp, const Real* dout, int N, int width,
                                           int begin, int end) {
  for (int i = 0; i < N; ++i) {
    const std::size_t row = static_cast<std::size_t>(i) * width;
#pragma omp simd
    for (int c = begin; c < end; ++c) {
      const Real d = dout[row + c] * gelu_slope(widened(inp[row + c]));
      dinp[row + c] = d;
      dbias[c] += d;
    }
  }
}

template void gelu_forward<float, float>(float*, const float*, std::int64_t);
template void gelu_forward<double, double>(double*, const double*, std::int64_t);
template void gelu_forward<float, std::uint16_t>(float*, const std::uint16_t*, std::int64_t);
template void gelu_backward<float>(float*, const float*, const float*, std::int64_t);
template void gelu_backward<double>(double*, const double*, const double*, std::int64_t);
template void gelu_bias_backward<float, float>(float*, float*, const float*, const float*, int, int, int, int);
template void gelu_bias_backward<double, double>(double*, double*, const double*, const double*, int, int, int, int);
template void gelu_bias_backward<float, std::uint16_t>(float*, float*, const std::uint16_t*, const float*, int, int,
                                                       int, int);

}  // namespace troupe::compute::cpu
