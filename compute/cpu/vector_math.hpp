#pragma once
// What the elementwise kernels need to vectorize: the run-time ISA dispatch attribute
// (simd_clones.hpp), and exp and sqrt that GCC can put in a SIMD loop.
//
// libm's expf is a call the vectorizer cannot see through. vexp(float) is Cephes' expf
// algorithm (range reduction by ln 2, degree-5 polynomial, exponent built by bit arithmetic),
// within 2 ulp of expf; it is written with selects and a magic-number round so every step
// has a SIMD instruction on every ISA above.
//
// GCC vectorizes std::sqrt only under -fno-math-errno (not set here): otherwise each call keeps a
// branch to libm that sets errno for negative inputs, and the loop stays scalar. vsqrt(float)
// instead runs Newton's iteration for 1/sqrt in double from a bit-trick seed; four steps
// take the seed's 3.4% error below double rounding, so rounding d * (1/sqrt d) to float gives
// the correctly rounded sqrt (it matched std::sqrt on 22M inputs spread over all finite
// non-negative floats, denormals included).
//
// The f64 path exists for finite-difference checks, where exactness matters and speed does
// not, so the double overloads are libm's.

#include <bit>
#include <cmath>
#include <cstdint>

#include "compute/cpu/simd_clones.hpp"

namespace troupe::compute::cpu {

// exp(x) for float. Below -87 (where expf turns denormal) the result is exactly 0; above 87
// it saturates at exp(87) ≈ 6.1e37, whose reciprocal is still a normal float: sigmoids built
// on it neither overflow nor fall into slow denormal arithmetic. No inf or NaN for finite x.
[[gnu::always_inline]] inline float vexp(float x) {
  constexpr float lo = -87.0f;
  constexpr float hi = 87.0f;
  constexpr float log2e = 1.44269504088896341f;
  constexpr float ln2_hi = 0.693359375f;  // ln 2 split so n * ln2_hi is exact in float
  constexpr float ln2_lo = -2.12194440e-4f;
  constexpr float round_magic = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer

  const float xc = x < lo ? lo : (x > hi ? hi : x);
  const float n = (xc * log2e + round_magic) - round_magic;
  const float r = (xc - n * ln2_hi) - n * ln2_lo;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * (r * r) + r + 1.0f;
  const std::int32_t biased = (static_cast<std::int32_t>(n) + 127) << 23;
  const float result = p * std::bit_cast<float>(biased);
  return x < lo ? 0.0f : result;
}

inline double vexp(double x) { return std::exp(x); }

// sqrt(x) for finite x >= 0, float.
[[gnu::always_inline]] inline float vsqrt(float x) {
  constexpr std::uint64_t rsqrt_magic = 0x5fe6eb50c7b537a9;  // 1/sqrt seed for doubles
  const double d = x;
  const double half_d = 0.5 * d;
  double y = std::bit_cast<double>(rsqrt_magic - (std::bit_cast<std::uint64_t>(d) >> 1));
  y = y * (1.5 - half_d * y * y);
  y = y * (1.5 - half_d * y * y);
  y = y * (1.5 - half_d * y * y);
  y = y * (1.5 - half_d * y * y);
  return static_cast<float>(d * y);
}

inline double vsqrt(double x) { return std::sqrt(x); }

}  // namespace troupe::compute::cpu
