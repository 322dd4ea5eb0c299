// Causal multi-head self-attention as gemms on strided slices of qkv: for head h of sequence
// b, q, k and v are (T, hs) matrices with leading dimension 3C that start at columns h*hs,
// C + h*hs and 2C + h*hs of qkv; nothing is copied out.
//
// Causality is exploited by row blocks of query positions [r0, r1): such a block only sees
// keys [0, r1), so every gemm is cut to that width and roughly 40% of the work above the
// diagonal is never done. Inside a block, the entries above the diagonal are computed by the
// gemm and then masked.
//
// Forward, per (b, h) and row block:
//   1. att[r0:r1, 0:r1] = scale * q[r0:r1] · k[0:r1]ᵀ          (gemm)
//   2. causal softmax of each row i over columns 0..i; columns i+1..T-1 set to 0
//   3. out[r0:r1] = att[r0:r1, 0:r1] · v[0:r1]                  (gemm)
// Backward, per (b, h), row blocks from the last to the first so that the first gemm into dk
// and dv spans all T rows and overwrites them (beta 0), and later ones accumulate:
//   1. datt[r0:r1, 0:r1] = dout[r0:r1] · v[0:r1]ᵀ               (gemm)
//   2. dv[0:r1] (+)= att[r0:r1, 0:r1]ᵀ · dout[r0:r1]            (gemm)
//   3. softmax backward in place: datt = att * (datt - rowsum(att * datt)), 0 above diagonal
//   4. dq[r0:r1] = scale * datt[r0:r1, 0:r1] · k[0:r1]          (gemm)
//   5. dk[0:r1] (+)= scale * datt[r0:r1, 0:r1]ᵀ · q[r0:r1]       (gemm)

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "compute/cpu/blas.hpp"
#include "compute/cpu/kernels.hpp"
#include "compute/cpu/softmax_row.hpp"
#include "compute/cpu/vector_math.hpp"

namespace troupe::compute::cpu {
namespace {

constexpr int row_block = 64;

// Rows r0..r1-1 of one head's (T, T) score matrix become causal softmax probabilities.
template <typename Real>
TROUPE_SIMD_CLONES void causal_softmax_rows(Real* att, int r0, int r1, int T) {
  for (int i = r0; i < r1; ++i) {
    Real* a = att + static_cast<std::size_t>(i) * T;
    const int n = i + 1;
    softmax_row(a, a, n, row_max(a, n));
    std::fill(a + n, a + T, Real(0));
  }
}

// Rows r0..r1-1 of dP (in datt) become dS = P * (dP - rowsum(P * dP)); columns i+1..r1-1
// are zeroed because the following gemms read the block up to column r1.
template <typename Real>
TROUPE_SIMD_CLONES void causal_softmax_backward_rows(Real* datt, const Real* att, int r0, int r1, int T) {
  for (int i = r0; i < r1; ++i) {
    Real* d = datt + static_cast<std::size_t>(i) * T;
    const Real* p = att + static_cast<std::size_t>(i) * T;
    const int n = i + 1;
    Real dot = 0;
#pragma omp simd reduction(+ : dot)
    for (int j = 0; j < n; ++j) dot += p[j] * d[j];
#pragma omp simd
    for (int j = 0; j < n; ++j) d[j] = p[j] * (d[j] - dot);
    std::fill(d + n, d + r1, Real(0));
  }
}

}  // namespace

template <typename Real>
void attention_forward(Real* out, Real* att, const Real* qkv, int B, int T, int C, int NH) {
  const int hs = C / NH;
  const int ld = 3 * C;
  const Real scale = Real(1) / std::sqrt(Real(hs));
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const Real* q = qkv + static_cast<std::size_t>(b) * T * ld + static_cast<std::size_t>(h) * hs;
      const Real* k = q + C;
      const Real* v = q + 2 * C;
      Real* a = att + (static_cast<std::size_t>(b) * NH + h) * T * T;
      Real* o = out + static_cast<std::size_t>(b) * T * C + static_cast<std::size_t>(h) * hs;
      for (int r0 = 0; r0 < T; r0 += row_block) {
        const int r1 = std::min(r0 + row_block, T);
        const int rows = r1 - r0;
        Real* a_block = a + static_cast<std::size_t>(r0) * T;
        gemm(CblasNoTrans, CblasTrans, rows, r1, hs, scale, q + static_cast<std::size_t>(r0) * ld, ld, k, ld, Real(0),
             a_block, T);
        causal_softmax_rows(a, r0, r1, T);
        gemm(CblasNoTrans, CblasNoTrans, rows, hs, r1, Real(1), a_block, T, v, ld, Real(0),
             o + static_cast<std::size_t>(r0) * C, C);
      }
    }
  }
}

template <typename Real>
void attention_backward(Real* dqkv, Real* datt, const Real* dout, const Real* qkv, const Real* att, int B, int T, int C,
                        int NH) {
  const int hs = C / NH;
  const int ld = 3 * C;
  const Real scale = Real(1) / std::sqrt(Real(hs));
  const int last_r0 = (T - 1) / row_block * row_block;
  for (int b = 0; b < B; ++b) {
    for (int h = 0; h < NH; ++h) {
      const std::size_t head_offset = static_cast<std::size_t>(b) * T * ld + static_cast<std::size_t>(h) * hs;
      const Real* q = qkv + head_offset;
      const Real* k = q + C;
      const Real* v = q + 2 * C;
      Real* dq = dqkv + head_offset;
      Real* dk = dq + C;
      Real* dv = dq + 2 * C;
      const Real* a = att + (static_cast<std::size_t>(b) * NH + h) * T * T;
      Real* da = datt + (static_cast<std::size_t>(b) * NH + h) * T * T;
      const Real* d = dout + static_cast<std::size_t>(b) * T * C + static_cast<std::size_t>(h) * hs;
      for (int r0 = last_r0; r0 >= 0; r0 -= row_block) {
        const int r1 = std::min(r0 + row_block, T);
        const int rows = r1 - r0;
        const Real beta = r1 == T ? Real(0) : Real(1);
        const Real* a_block = a + static_cast<std::size_t>(r0) * T;
        Real* da_block = da + static_cast<std::size_t>(r0) * T;
        const Real* d_block = d + static_cast<std::size_t>(r0) * C;
        gemm(CblasNoTrans, CblasTrans, rows, r1, hs, Real(1), d_block, C, v, ld, Real(0), da_block, T);
        gemm(CblasTrans, CblasNoTrans, r1, hs, rows, Real(1), a_block, T, d_block, C, beta, dv, ld);
        causal_softmax_backward_rows(da, a, r0, r1, T);
        gemm(CblasNoTrans, CblasNoTrans, rows, hs, r1, scale, da_block, T, k, ld, Real(0),
             dq + static_cast<std::size_t>(r0) * ld, ld);
        gemm(CblasTrans, CblasNoTrans, r1, hs, rows, scale, da_block, T, q + static_cast<std::size_t>(r0) * ld, ld,
             beta, dk, ld);
      }
    }
  }
}

template void attention_forward<float>(float*, float*, const float*, int, int, int, int);
template void attention_forward<double>(double*, double*, const double*, int, int, int, int);
template void attention_backward<float>(float*, float*, const float*, const float*, const float*, int, int, int, int);
template void attention_backward<double>(double*, double*, const double*, const double*, const double*, int, int, int,
                                         int);

}  // namespace troupe::compute::cpu
