// Linear layer, weight (OC, C) in PyTorch's layout. All three products are one gemm each. A
// forward with a bias (or a residual stream to add onto) first writes bias (+ residual) into out,
// then the gemm accumulates onto it (beta = 1): no more than the zeroing pass a beta = 0 gemm makes
// anyway, and no second sweep. Where out is larger than the caches hold, those rows go out through
// streaming stores: a plain store first reads each line in, and the lines it dirties push out what
// the gemm is about to read (the forward products' share of a step, docs/benchmarks.md).
// The bias gradient is a column sum over rows in row order (deterministic), a call of its own so
// the backend can split the columns among threads.

#include <immintrin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "compute/check.hpp"
#include "compute/cpu/blas.hpp"
#include "compute/cpu/cpu_kernels.hpp"
#include "compute/cpu/vector_math.hpp"

namespace troupe::compute::cpu {
template <typename Real>
TROUPE_SIMD_CLONES void matmul_bias_backward(Real* dbias, const Real* dout, int N, int width, int ld) {
  for (int i = 0; i < N; ++i) {
    const Real* d = dout + static_cast<std::size_t>(i) * ld;
#pragma omp simd
    for (int o = 0; o < width; ++o) dbias[o] += d[o];
  }
}

template <typename Real>
void matmul_forward(Real* out, const Real* inp, const Real* weight, int N, int C, int OC, bool accumulate) {
  gemm(CblasNoTrans, CblasTrans, N, OC, C, Real(1), inp, C, weight, C, accumulate ? Real(1) : Real(0), out, OC);
}

namespace {

// SSE's loads, adds and streaming stores, which every x86-64 has, for four floats or two doubles.
template <typename Real>
struct Sse;
template <>
struct Sse<float> {
  static constexpr int width = 4;
  static __m128 load(const float* p) { return _mm_loadu_ps(p); }
  static __m128 add(__m128 a, __m128 b) { return _mm_add_ps(a, b); }
  static void stream(float* p, __m128 v) { _mm_stream_ps(p, v); }
};
template <>
struct Sse<double> {
  static constexpr int width = 2;
  static __m128d load(const double* p) { return _mm_loadu_pd(p); }
  static __m128d add(__m128d a, __m128d b) { return _mm_add_pd(a, b); }
  static void stream(double* p, __m128d v) { _mm_stream_pd(p, v); }
};

// out[c] = residual[c] + bias[c] over one row, through streaming stores from the first 16-byte
// boundary on. Either input may be null, and stands for 0 then without an addition (so a bias alone
// is copied bit for bit, -0 included).
template <typename Real>
void stream_row(Real* out, const Real* residual, const Real* bias, int n) {
  using V = Sse<Real>;
  auto value = [&](int c) {
    if (residual == nullptr) return bias[c];
    return bias == nullptr ? residual[c] : residual[c] + bias[c];
  };
  int c = 0;
  for (; c < n && reinterpret_cast<std::uintptr_t>(out + c) % 16 != 0; ++c) out[c] = value(c);
  for (; c + V::width <= n; c += V::width) {
    if (residual == nullptr)
      V::stream(out + c, V::load(bias + c));
    else if (bias == nullptr)
      V::stream(out + c, V::load(residual + c));
    else
      V::stream(out + c, V::add(V::load(residual + c), V::load(bias + c)));
  }
  for (; c < n; ++c) out[c] = value(c);
}

}  // namespace

template <typename Real>
void start_rows(Real* out, const Real* residual, const Real* bias, int rows, int OC, bool streaming) {
  TROUPE_CHECK(residual != nullptr || bias != nullptr, "start_rows needs a residual or a bias");
  for (int i = 0; i < rows; ++i) {
    const std::size_t at = static_cast<std::size_t>(i) * OC;
    const Real* r = residual == nullptr ? nullptr : residual + at;
    if (streaming) {
      stream_row(out + at, r, bias, OC);
    } else if (r == nullptr) {
      std::copy(bias, bias + OC, out + at);
    } else if (bias == nullptr) {
      std::copy(r, r + OC, out + at);
    } else {
      for (int c = 0; c < OC; ++c) out[at + c] = r[c] + bias[c];
    }
  }
  // Streaming stores are weakly ordered: they are made visible before this thread's part is
  // reported done, and so before the product reads the rows.
  if (streaming) _mm_sfence();
}

template <typename Real>
void matmul_backward_input(Real* dinp, const Real* dout, const Real* weight, int N, int C, int OC) {
  gemm(CblasNoTrans, CblasNoTrans, N, C, OC, Real(1), dout, OC, weight, C, Real(0), dinp, C);
}

template <typename Real>
void matmul_backward_weights(Real* dweight, const Real* dout, const Real* inp, int N, int C, int OC) {
  gemm(CblasTrans, CblasNoTrans, OC, C, N, Real(1), dout, OC, inp, C, Real(1), dweight, C);
}

template void matmul_forward<float>(float*, const float*, const float*, int, int, int, bool);
template void matmul_forward<double>(double*, const double*, const double*, int, int, int, bool);
template void start_rows<float>(float*, const float*, const float*, int, int, bool);
template void start_rows<double>(double*, const double*, const double*, int, int, bool);
template void matmul_backward_input<float>(float*, const float*, const float*, int, int, int);
template void matmul_backward_weights<float>(float*, const float*, const float*, int, int, int);
template void matmul_bias_backward<float>(float*, const float*, int, int, int);
template void matmul_bias_backward<double>(double*, const double*, int, int, int);
template void matmul_backward_input<double>(double*, const double*, const double*, int, int, int);
template void matmul_backward_weights<double>(double*, const double*, const double*, int, int, int);

}  // namespace troupe::compute::cpu
