// CpuBackend's grouped products (Backend::grouped_matmul_*): all of a rank's experts in one run of
// the team, each thread taking an equal share of their rows (or of their weight gradients' work)
// with OpenBLAS on one thread each (grouped_matmul.hpp). One threaded GEMM per expert instead
// would start OpenBLAS' threads once per expert and split each expert's rows, however few, among
// them. Under bf16 the products go one per expert to the bf16 products, which split each product's
// rows among the team themselves.

#include <span>

#include "compute/backend_checks.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/cpu/cpu_backend_ops.hpp"
#include "compute/cpu/grouped_matmul.hpp"
#include "compute/cpu/openblas_setup.hpp"
#include "compute/cpu/thread_team.hpp"

namespace troupe::compute {

using namespace cpu_backend_ops;

template <typename Real>
static const Real* data_or_null(const Tensor& t) {
  return t.defined() ? t.data_as<Real>() : nullptr;
}

void CpuBackend::grouped_matmul_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                        std::span<const std::int64_t> rows_of) {
  constexpr const char* op = "grouped_matmul_forward";
  if (bf16_for(weight.dtype()) != nullptr) return Backend::grouped_matmul_forward(out, inp, weight, bias, rows_of);
  const DType dtype =
      bias.defined() ? check_real(op, {&out, &inp, &weight, &bias}) : check_real(op, {&out, &inp, &weight});
  const auto dims = checks::grouped_matmul(out, inp, weight, bias, rows_of, op);
  with_real(dtype, [&]<typename Real>(Real) {
    const cpu::OpenblasThreadsWhile one_each(1, threads_, team_->size() > 1);
    team_->run(dims.N, row_grain, [&](std::int64_t begin, std::int64_t end) {
      cpu::grouped_forward_rows(out.data_as<Real>(), inp.data_as<Real>(), weight.data_as<Real>(),
                                data_or_null<Real>(bias), rows_of, dims.C, dims.OC, begin, end);
    });
  });
}

void CpuBackend::grouped_matmul_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& weight,
                                               std::span<const std::int64_t> rows_of) {
  constexpr const char* op = "grouped_matmul_backward_input";
  if (bf16_for(weight.dtype()) != nullptr) return Backend::grouped_matmul_backward_input(dinp, dout, weight, rows_of);
  const DType dtype = check_real(op, {&dinp, &dout, &weight});
  const auto dims = checks::grouped_matmul(dout, dinp, weight, Tensor{}, rows_of, op);
  with_real(dtype, [&]<typename Real>(Real) {
    const cpu::OpenblasThreadsWhile one_each(1, threads_, team_->size() > 1);
    team_->run(dims.N, row_grain, [&](std::int64_t begin, std::int64_t end) {
      cpu::grouped_backward_input_rows(dinp.data_as<Real>(), dout.data_as<Real>(), weight.data_as<Real>(), rows_of,
                                       dims.C, dims.OC, begin, end);
    });
  });
}

void CpuBackend::grouped_matmul_backward_weights(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                                 std::span<const std::int64_t> rows_of) {
  constexpr const char* op = "grouped_matmul_backward_weights";
  if (bf16_for(dweight.dtype()) != nullptr)
    return Backend::grouped_matmul_backward_weights(dweight, dbias, dout, inp, rows_of);
  const DType dtype =
      dbias.defined() ? check_real(op, {&dweight, &dbias, &dout, &inp}) : check_real(op, {&dweight, &dout, &inp});
  const auto dims = checks::grouped_matmul(dout, inp, dweight, dbias, rows_of, op);
  with_real(dtype, [&]<typename Real>(Real) {
    const cpu::OpenblasThreadsWhile one_each(1, threads_, team_->size() > 1);
    team_->run(cpu::grouped_weight_units(rows_of, dims.OC), 1, [&](std::int64_t begin, std::int64_t end) {
      cpu::grouped_backward_weights_units(dweight.data_as<Real>(), dbias.defined() ? dbias.data_as<Real>() : nullptr,
                                          dout.data_as<Real>(), inp.data_as<Real>(), rows_of, dims.C, dims.OC, begin,
                                          end);
    });
  });
}

}  // namespace troupe::compute
