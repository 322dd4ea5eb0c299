#include "compute/cpu/grouped_matmul.hpp"

#include <algorithm>
#include <cstddef>

#include "compute/cpu/cpu_kernels.hpp"

namespace troupe::compute::cpu {
namespace {

// fn(e, a, b) for each expert e whose rows meet [begin, end), with [a, b) the rows they share.
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
void grouped_forward_rows(Real* out, const Real* bias, const Multiply<Real>& multiply,
                          std::span<const std::int64_t> rows_of, int C, int OC, std::int64_t begin, std::int64_t end) {
  for_each_part(rows_of, begin, end, [&](std::int64_t e, std::int64_t a, std::int64_t b) {
    const int rows = static_cast<int>(b - a);
    Real* o = out + a * OC;
    if (bias != nullptr) start_rows(o, static_cast<const Real*>(nullptr), bias + e * OC, rows, OC, false);
    multiply(false, true, rows, OC, C, a * C, C, e * OC * C, C, bias != nullptr, o, OC);
  });
}

template <typename Real>
void grouped_backward_input_rows(Real* dinp, const Multiply<Real>& multiply, std::span<const std::int64_t> rows_of,
                                 int C, int OC, std::int64_t begin, std::int64_t end) {
  for_each_part(rows_of, begin, end, [&](std::int64_t e, std::int64_t a, std::int64_t b) {
    multiply(false, false, static_cast<int>(b - a), C, OC, a * OC, OC, e * OC * C, C, false, dinp + a * C, C);
  });
}

std::int64_t grouped_weight_units(std::span<const std::int64_t> rows_of, int OC) {
  std::int64_t units = 0;
  for (std::int64_t r : rows_of) units += r * OC;
  return units;
}

template <typename Real>
void grouped_backward_weights_units(Real* dweight, Real* dbias, const Real* dout, const Multiply<Real>& multiply,
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
    const std::int64_t expert = static_cast<std::int64_t>(e);
    multiply(true, false, outputs, C, K, lo * OC + o0, OC, lo * C, C, true, dweight + (expert * OC + o0) * C, C);
    if (dbias != nullptr) matmul_bias_backward(dbias + expert * OC + o0, dout + lo * OC + o0, K, outputs, OC);
  }
}

template void grouped_forward_rows<float>(float*, const float*, const Multiply<float>&, std::span<const std::int64_t>,
                                          int, int, std::int64_t, std::int64_t);
template void grouped_forward_rows<double>(double*, const double*, const Multiply<double>&,
                                           std::span<const std::int64_t>, int, int, std::int64_t, std::int64_t);
template void grouped_backward_input_rows<float>(float*, const Multiply<float>&, std::span<const std::int64_t>, int,
                                                 int, std::int64_t, std::int64_t);
template void grouped_backward_input_rows<double>(double*, const Multiply<double>&, std::span<const std::int64_t>, int,
                                                  int, std::int64_t, std::int64_t);
template void grouped_backward_weights_units<float>(float*, float*, const float*, const Multiply<float>&,
                                                    std::span<const std::int64_t>, int, int, std::int64_t,
                                                    std::int64_t);
template void grouped_backward_weights_units<double>(double*, double*, const double*, const Multiply<double>&,
                                                     std::span<const std::int64_t>, int, int, std::int64_t,
                                                     std::int64_t);

}  // namespace troupe::compute::cpu
