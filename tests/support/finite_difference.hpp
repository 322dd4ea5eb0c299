#pragma once
// Gradient checks by finite differences, shared by the layer and whole-model tests (float64).
//
// A difference quotient is off from the true derivative in two ways. Truncation: the central
// difference below is exact for polynomials up to degree 4, so it is off by O(h⁴) times a fifth
// derivative, in proportion to how curved the loss is rather than to the gradient. Rounding: every
// evaluated loss is off by a few units in the last place (ulp) of the loss's magnitude, so the
// quotient is off by about ulp(loss)/h whatever the gradient is. Where a gradient is exactly zero
// in theory (a key bias: the softmax ignores a constant added to every key) the quotient is that
// rounding and nothing else, and its value depends on how the CPU's kernels round: 0 on one
// machine, ±1 ulp/(2h) on another. A relative error, floored or not, turns that into a failure on
// some CPUs. So a gradient passes when
//     |numeric − analytic| ≤ atol + rtol·|numeric|,
// with atol a fixed number of rounding units (rounding_unit) and rtol small enough that a backward
// which is wrong by 0.1 % anywhere the gradient stands above the noise still fails.

#include <cmath>
#include <functional>
#include <limits>

namespace troupe::test {

// d loss/dx at x by the fourth-order central difference
//     (8 (L(x + h) − L(x − h)) − (L(x + 2h) − L(x − 2h))) / 12h.
// Its truncation error is O(h⁴), against O(h²) for (L(x + h) − L(x − h)) / 2h, so h can be large
// enough for the rounding noise (∝ 1/h) to be small without truncation taking its place. x is
// restored before returning.
inline double central_difference(double& x, double h, const std::function<double()>& loss) {
  const double saved = x;
  auto at = [&](double step) {
    x = saved + step;
    return loss();
  };
  const double near = at(h) - at(-h);
  const double far = at(2 * h) - at(-2 * h);
  x = saved;
  return (8 * near - far) / (12 * h);
}

// ulp(magnitude)/h: what one unit of rounding in each evaluated loss does to the quotient above.
// If each evaluation is off by at most k ulp, the quotient is off by at most (8+8+1+1)/12·k = 1.5 k
// of these. `magnitude` is the size the loss's rounding scales with: |loss| for a sum of positive
// terms (a mean cross-entropy), the sum of the terms' absolute values where they cancel.
inline double rounding_unit(double magnitude, double h) {
  const double m = std::abs(magnitude);
  return (std::nextafter(m, std::numeric_limits<double>::infinity()) - m) / h;
}

struct GradientTolerance {
  double atol = 0;
  double rtol = 0;
  // The share of the allowance |numeric − analytic| uses: at most 1 passes. Infinite when either
  // is NaN, so that a NaN can neither pass nor hide behind a larger error elsewhere.
  double used(double numeric, double analytic) const {
    const double diff = std::abs(numeric - analytic);
    if (std::isnan(diff)) return std::numeric_limits<double>::infinity();
    return diff / (atol + rtol * std::abs(numeric));
  }
};

}  // namespace troupe::test
