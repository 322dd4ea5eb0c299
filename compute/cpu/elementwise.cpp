// The plain elementwise passes: residual add, in-place scale, zeroing through streaming stores,
// and the sum of squares the gradient-norm clip needs. Zeroing a large buffer (the gradients, at
// the start of a step) with plain stores reads every line in before overwriting it, and leaves the
// cache full of zeros nothing reads until the backward; streaming stores do neither. The sum is
// accumulated in double whatever the input dtype, so the norm of ~1e8 float gradients keeps its
// digits; the SIMD reduction order is fixed by the compiled loop, so it is deterministic on a
// given machine.

#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "compute/cpu/cpu_kernels.hpp"
#include "compute/cpu/vector_math.hpp"
#include "compute/cuda/bf16.hpp"

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

void stream_zero(void* data, std::size_t bytes) {
  auto* p = static_cast<unsigned char*>(data);
  const std::size_t head = std::min(bytes, (16 - reinterpret_cast<std::uintptr_t>(p) % 16) % 16);
  std::memset(p, 0, head);
  std::size_t at = head;
  for (; at + 16 <= bytes; at += 16) _mm_stream_si128(reinterpret_cast<__m128i*>(p + at), _mm_setzero_si128());
  std::memset(p + at, 0, bytes - at);
  _mm_sfence();  // streaming stores are weakly ordered: visible before the caller goes on
}

template void residual_forward<float>(float*, const float*, const float*, std::int64_t);
template void residual_forward<double>(double*, const double*, const double*, std::int64_t);
template void scale<float>(float*, std::int64_t, float);
template void scale<double>(double*, std::int64_t, double);
template double sum_of_squares<float>(const float*, std::int64_t);
template double sum_of_squares<double>(const double*, std::int64_t);

TROUPE_SIMD_CLONES void round_to_bf16_bits(std::uint16_t* out, const float* in, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = float_to_bf16_bits(in[i]);
}

TROUPE_SIMD_CLONES void widen_bf16_bits(float* out, const std::uint16_t* in, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = bf16_bits_to_float(in[i]);
}

}  // namespace troupe::compute::cpu
