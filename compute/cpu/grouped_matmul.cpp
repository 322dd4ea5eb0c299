#include "compute/cpu/grouped_matmul.hpp"

#include <algorithm>
#include <cstddef>

#include "compute/cpu/blas.hpp"
#include "compute/cpu/cpu_kernels.hpp"

namespace troupe::compute::cpu {
namespace {

// fn(e, lo, a, b) for each expert e whose rows (from lo on) meet [begin, end), with [a, b) the rows
// they share.
template <typename Fn>
void for_each_part(std::span<const std::int64_t> rows_of, std::int64_t begin, std::int64_t end, Fn&& fn) {
  std::int64_t lo = 0;
  for (std::size_t e = 0; e < rows_of.size() && lo < end; lo += rows_of[e], ++e) {
    const std::int64_t a = std::max(lo, begin), b = std::min(lo + rows_of[e], end);
    if (a < b) fn(static_cast<std::int64_t>(e), a, b);
  }
}

std::int64_t ceil_div(std::int64_t n, std::int64_t d) { return (n + d - 1) / d; }

}  // namespace

template <typename Real>
void grouped_forward_rows(Real* out, const Real* inp, const Real* weight, const Real* bias,
                          std::span<const std::int64_t> rows_of, int C, int OC, std::int64_t begin, std::int64_t end) {
  for_each_part(rows_of, begin, end, [&](std::int64_t e, std::int64_t a, std::int64_t b) {
    const int rows = static_cast<int>(b - a);
    Real* o = out + a * OC;
    if (bias != nullptr) start_rows(o, static_cast<const Real*>(nullptr), bias + e * OC, rows, OC, false);
    matmul_forward(o, inp + a * C, weight + e * OC * C, rows, C, OC, bias != nullptr);
  });
}

template <typename Real>
void grouped_backward_input_rows(Real* dinp, const Real* dout, const Real* weight,
                                 std::span<const std::int64_t> rows_of, int C, int OC, std::int64_t begin,
                                 std::int64_t end) {
  for_each_part(rows_of, begin, end, [&](std::int64_t e, std::int64_t a, std::int64_t b) {
    matmul_backward_input(dinp + a * C, dout + a * OC, weight + e * OC * C, static_cast<int>(b - a), C, OC);
  });
}

std::int64_t grouped_weight_units(std::span<const std::int64_t> rows_of, int OC) {
  std::int64_t units = 0;
  for (std::int64_t r : rows_of) units += r * OC;
  return units;
}

template <typename Real>
void grouped_backward_weights_units(Real* dweight, Real* dbias, const Real* dout, const Real* inp,
                                    std::span<const std::int64_t> rows_of, int C, int OC, std::int64_t begin,
                                    std::int64_t end) {
  std::int64_t base = 0, lo = 0;  // the expert's first unit and first row
  for (std::size_t e = 0; e < rows_of.size() && base < end; base += rows_of[e] * OC, lo += rows_of[e], ++e) {
    const std::int64_t r = rows_of[e];
    if (r == 0) continue;
    // Output row o's units start at base + o·r: this share's rows start in [begin, end).
    const std::int64_t o0 = std::clamp<std::int64_t>(ceil_div(begin - base, r), 0, OC);
    const std::int64_t o1 = std::clamp<std::int64_t>(ceil_div(end - base, r), 0, OC);
    if (o0 >= o1) continue;
    const int outputs = static_cast<int>(o1 - o0), K = static_cast<int>(r);
    const Real* d = dout + lo * OC + o0;
    gemm(CblasTrans, CblasNoTrans, outputs, C, K, Real(1), d, OC, inp + lo * C, C, Real(1),
         dweight + (static_cast<std::int64_t>(e) * OC + o0) * C, C);
    if (dbias != nullptr) matmul_bias_backward(dbias + static_cast<std::int64_t>(e) * OC + o0, d, K, outputs, OC);
  }
}

template void grouped_forward_rows<float>(float*, const float*, const float*, const float*,
                                          std::span<const std::int64_t>, int, int, std::int64_t, std::int64_t);
template void grouped_forward_rows<double>(double*, const double*, const double*, const double*,
                                           std::span<const std::int64_t>, int, int, std::int64_t, std::int64_t);
template void grouped_backward_input_rows<float>(float*, const float*, const float*, std::span<const std::int64_t>, int,
                                                 int, std::int64_t, std::int64_t);
template void grouped_backward_input_rows<double>(double*, const double*, const double*, std::span<const std::int64_t>,
                                                  int, int, std::int64_t, std::int64_t);
template void grouped_backward_weights_units<float>(float*, float*, const float*, const float*,
                                                    std::span<const std::int64_t>, int, int, std::int64_t,
                                                    std::int64_t);
template void grouped_backward_weights_units<double>(double*, double*, const double*, const double*,
                                                     std::span<const std::int64_t>, int, int, std::int64_t,
                                                     std::int64_t);

}  // namespace troupe::compute::cpu
