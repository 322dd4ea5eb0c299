#pragma once
// The grouped products of experts stacked in one tensor (Backend::grouped_matmul_*), one share at a
// time, for a thread of the backend's team. The rows come grouped by expert, rows_of[e] for expert
// e one after the other; weight is (E, OC, C) and bias (E, OC), row-major. A share of the forward or
// of the input gradient is rows [begin, end) of all the experts' rows together: one single-threaded
// product for each expert's part of them. A share of the weight gradients is units [begin, end) of
// a line on which each expert's OC output rows weigh its row count each (grouped_weight_units long):
// each output row of an expert's gradient is one thread's, over all the expert's rows in one
// product. Equal shares are so equal work however uneven the experts' counts, and no element is
// written by two shares: the split changes which product an element falls in, never the order of
// its sum.
//
// The products go through `multiply`, so the same shares serve every precision: BLAS on the
// tensors as they are (f32, f64), or the bf16 products on operands rounded once for the call.

#include <cstdint>
#include <functional>
#include <span>

namespace troupe::compute::cpu {

// c (m, n) = op(a) · op(b), added onto what c holds with `accumulate`, on the calling thread: op(a)
// (m, k) from element a_at of the call's first operand (xᵀ of the stored (k, m) with transpose_a),
// op(b) (k, n) from element b_at of its second, row-major with leading dimensions lda and ldb.
template <typename Real>
using Multiply = std::function<void(bool transpose_a, bool transpose_b, int m, int n, int k, std::int64_t a_at, int lda,
                                    std::int64_t b_at, int ldb, bool accumulate, Real* c, int ldc)>;

// out rows [begin, end) = their expert's inp rows · weightᵀ (+ its bias, if not null); `multiply`'s
// operands are inp and weight.
template <typename Real>
void grouped_forward_rows(Real* out, const Real* bias, const Multiply<Real>& multiply,
                          std::span<const std::int64_t> rows_of, int C, int OC, std::int64_t begin, std::int64_t end);

// dinp rows [begin, end) = their expert's dout rows · weight; `multiply`'s operands are dout and
// weight.
template <typename Real>
void grouped_backward_input_rows(Real* dinp, const Multiply<Real>& multiply, std::span<const std::int64_t> rows_of,
                                 int C, int OC, std::int64_t begin, std::int64_t end);

// The weight gradients' line: the sum over experts of rows_of[e] · OC.
std::int64_t grouped_weight_units(std::span<const std::int64_t> rows_of, int OC);

// dweight += doutᵀ · inp and dbias (if not null) += dout's column sums, expert by expert, for the
// output rows whose units start in [begin, end); `multiply`'s operands are dout and inp.
template <typename Real>
void grouped_backward_weights_units(Real* dweight, Real* dbias, const Real* dout, const Multiply<Real>& multiply,
                                    std::span<const std::int64_t> rows_of, int C, int OC, std::int64_t begin,
                                    std::int64_t end);

}  // namespace troupe::compute::cpu
