// CpuBackend's grouped products (Backend::grouped_matmul_*): all of a rank's experts in one run of
// the team, each thread taking an equal share of their rows (or of their weight gradients' work),
// one single-threaded product per expert it meets (grouped_matmul.hpp). One threaded product per
// expert instead would start OpenBLAS' threads once per expert and split each expert's rows,
// however few, among them. Under bf16 the call's two operands are rounded once on the team
// (Bf16Products::round), and each share multiplies them on its thread: one-thread oneDNN matmuls on
// BF16 units, sgemm on OpenBLAS' one thread emulated.

#include <span>

#include "compute/backend_checks.hpp"
#include "compute/cpu/blas.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/cpu/cpu_backend_ops.hpp"
#include "compute/cpu/grouped_matmul.hpp"
#include "compute/cpu/openblas_setup.hpp"
#include "compute/cpu/thread_team.hpp"

namespace troupe::compute {

using namespace cpu_backend_ops;

namespace {

// A share's products by BLAS on the operands a and b as they are.
template <typename Real>
cpu::Multiply<Real> blas_products(const Real* a, const Real* b) {
  return [a, b](bool transpose_a, bool transpose_b, int m, int n, int k, std::int64_t a_at, int lda, std::int64_t b_at,
                int ldb, bool accumulate, Real* c, int ldc) {
    cpu::gemm(transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, m, n, k, Real(1),
              a + a_at, lda, b + b_at, ldb, accumulate ? Real(1) : Real(0), c, ldc);
  };
}

// A share's products by the bf16 products, on operands they rounded for the call.
cpu::Multiply<float> bf16_products(cpu::Bf16Products& products, cpu::Bf16Products::Rounded rounded) {
  return [&products, rounded](bool transpose_a, bool transpose_b, int m, int n, int k, std::int64_t a_at, int lda,
                              std::int64_t b_at, int ldb, bool accumulate, float* c, int ldc) {
    products.multiply_here(rounded, transpose_a, transpose_b, m, n, k, a_at, lda, b_at, ldb, accumulate, c, ldc);
  };
}

}  // namespace

// fn(multiply) with Real the tensors' dtype and multiply a share's products of operands a and b:
// BLAS, or under bf16 the bf16 products on a and b rounded once (a_count and b_count elements).
template <typename Fn>
void CpuBackend::with_grouped_products(DType dtype, const Tensor& a, const Tensor& b, Fn&& fn) {
  const cpu::OpenblasThreadsWhile one_each(1, threads_, team_->size() > 1);
  if (cpu::Bf16Products* bf16 = bf16_for(dtype)) {
    const cpu::Bf16Products::Rounded rounded = bf16->round(operand_of(a), a.numel(), operand_of(b), b.numel());
    bf16->prepare_matmuls(team_->size());
    fn(bf16_products(*bf16, rounded));
    return;
  }
  with_real(dtype, [&]<typename Real>(Real) { fn(blas_products(a.data_as<Real>(), b.data_as<Real>())); });
}

template <typename Real>
static Real* data_or_null(const Tensor& t) {
  return t.defined() ? t.data_as<Real>() : nullptr;
}

void CpuBackend::grouped_matmul_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                        std::span<const std::int64_t> rows_of) {
  constexpr const char* op = "grouped_matmul_forward";
  const DType dtype =
      bias.defined() ? check_real(op, {&out, &inp, &weight, &bias}) : check_real(op, {&out, &inp, &weight});
  const auto dims = checks::grouped_matmul(out, inp, weight, bias, rows_of, op);
  with_grouped_products(dtype, inp, weight, [&]<typename Real>(const cpu::Multiply<Real>& multiply) {
    team_->run(dims.N, row_grain, [&](std::int64_t begin, std::int64_t end) {
      cpu::grouped_forward_rows(out.data_as<Real>(), data_or_null<Real>(bias), multiply, rows_of, dims.C, dims.OC,
                                begin, end);
    });
  });
}

void CpuBackend::grouped_matmul_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& weight,
                                               std::span<const std::int64_t> rows_of) {
  constexpr const char* op = "grouped_matmul_backward_input";
  const DType dtype = check_real(op, {&dinp, &dout, &weight});
  const auto dims = checks::grouped_matmul(dout, dinp, weight, Tensor{}, rows_of, op);
  with_grouped_products(dtype, dout, weight, [&]<typename Real>(const cpu::Multiply<Real>& multiply) {
    team_->run(dims.N, row_grain, [&](std::int64_t begin, std::int64_t end) {
      cpu::grouped_backward_input_rows(dinp.data_as<Real>(), multiply, rows_of, dims.C, dims.OC, begin, end);
    });
  });
}

void CpuBackend::grouped_matmul_backward_weights(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                                 std::span<const std::int64_t> rows_of) {
  constexpr const char* op = "grouped_matmul_backward_weights";
  const DType dtype =
      dbias.defined() ? check_real(op, {&dweight, &dbias, &dout, &inp}) : check_real(op, {&dweight, &dout, &inp});
  const auto dims = checks::grouped_matmul(dout, inp, dweight, dbias, rows_of, op);
  with_grouped_products(dtype, dout, inp, [&]<typename Real>(const cpu::Multiply<Real>& multiply) {
    team_->run(cpu::grouped_weight_units(rows_of, dims.OC), 1, [&](std::int64_t begin, std::int64_t end) {
      cpu::grouped_backward_weights_units(dweight.data_as<Real>(), data_or_null<Real>(dbias), dout.data_as<Real>(),
                                          multiply, rows_of, dims.C, dims.OC, begin, end);
    });
  });
}

}  // namespace troupe::compute
