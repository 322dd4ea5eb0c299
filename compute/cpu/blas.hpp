#pragma once
// Every matmul of the CPU backend goes through gemm(), so templated kernels reach sgemm or
// dgemm by overload. Row-major throughout, with explicit leading dimensions: attention
// multiplies strided slices of qkv in place instead of copying them out.

#include <cblas.h>

namespace troupe::compute::cpu {

// c (m, n) = alpha * op(a) (m, k) · op(b) (k, n) + beta * c
inline void gemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m, int n, int k, float alpha, const float* a,
                 int lda, const float* b, int ldb, float beta, float* c, int ldc) {
  cblas_sgemm(CblasRowMajor, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

inline void gemm(CBLAS_TRANSPOSE trans_a, CBLAS_TRANSPOSE trans_b, int m, int n, int k, double alpha, const double* a,
                 int lda, const double* b, int ldb, double beta, double* c, int ldc) {
  cblas_dgemm(CblasRowMajor, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace troupe::compute::cpu
