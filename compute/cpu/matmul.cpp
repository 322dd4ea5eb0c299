// Linear layer, weight (OC, C) in PyTorch's layout. All three products are one gemm each;
// the bias is written into out first and the gemm accumulates onto it (beta = 1), which costs
// no more than the zeroing pass a beta = 0 gemm makes anyway, and saves a second sweep.
// The bias gradient is a column sum over rows in row order (deterministic), a call of its own so
// the backend can split the columns among threads.

#include <algorithm>
#include <cstddef>

#include "compute/cpu/blas.hpp"
#include "compute/cpu/kernels.hpp"
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
void matmul_forward(Real* out, const Real* inp, const Real* weight, const Real* bias, int N, int C, int OC) {
  if (bias != nullptr) {
    for (int i = 0; i < N; ++i) std::copy(bias, bias + OC, out + static_cast<std::size_t>(i) * OC);
  }
  gemm(CblasNoTrans, CblasTrans, N, OC, C, Real(1), inp, C, weight, C, bias != nullptr ? Real(1) : Real(0), out, OC);
}

template <typename Real>
void matmul_backward(Real* dinp, Real* dweight, const Real* dout, const Real* inp, const Real* weight, int N, int C,
                     int OC) {
  gemm(CblasNoTrans, CblasNoTrans, N, C, OC, Real(1), dout, OC, weight, C, Real(0), dinp, C);
  gemm(CblasTrans, CblasNoTrans, OC, C, N, Real(1), dout, OC, inp, C, Real(1), dweight, C);
}

template void matmul_forward<float>(float*, const float*, const float*, const float*, int, int, int);
template void matmul_forward<double>(double*, const double*, const double*, const double*, int, int, int);
template void matmul_backward<float>(float*, float*, const float*, const float*, const float*, int, int, int);
template void matmul_bias_backward<float>(float*, const float*, int, int, int);
template void matmul_bias_backward<double>(double*, const double*, int, int, int);
template void matmul_backward<double>(double*, double*, const double*, const double*, const double*, int, int, int);

}  // namespace troupe::compute::cpu
