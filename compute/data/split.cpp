#include "compute/data/split.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

namespace troupe::compute {
namespace {

bool valid_fraction(double f) { return f > 0.0 && f < 1.0; }  // false for NaN too

std::size_t val_count(std::size_t n, double val_fraction) {
  return static_cast<std::size_t>(std::floor(static_cast<double>(n) * val_fraction));
}

}  // namespace

Expected<TokenSplit> split_train_val(std::span<const std::uint16_t> tokens, double val_fraction, std::size_t window) {
  if (!valid_fraction(val_fraction)) {
    std::ostringstream os;
    os << "validation fraction must lie strictly between 0 and 1, got " << val_fraction;
    return Error{os.str()};
  }
  const std::size_t n_val = val_count(tokens.size(), val_fraction);
  const std::size_t n_train = tokens.size() - n_val;
  if (n_train < window || n_val < window) {
    std::ostringstream os;
    os << "token stream of " << tokens.size() << " tokens is too short to split with validation fraction "
       << val_fraction << ": training part " << n_train << " and validation part " << n_val
       << " tokens, each needs at least " << window << " (one window); at least "
       << min_tokens_for_split(window, val_fraction) << " tokens are needed";
    return Error{os.str()};
  }
  return TokenSplit{tokens.first(n_train), tokens.subspan(n_train)};
}

std::size_t min_tokens_for_split(std::size_t window, double val_fraction) {
  TROUPE_CHECK(valid_fraction(val_fraction), "val_fraction " + std::to_string(val_fraction));
  // Both part sizes are non-decreasing in n, so the lengths that work form a ray [n_min, inf).
  // Lower bounds on n_min: the validation part needs n * f >= window; the training part,
  // n - floor(n * f) < n * (1 - f) + 1, needs n * (1 - f) > window - 1. Start two below the
  // larger bound to absorb rounding and walk up (at most about 1 / (1 - f) steps).
  const double w = static_cast<double>(window);
  const double bound = std::floor(std::max(w / val_fraction, (w - 1.0) / (1.0 - val_fraction)));
  std::size_t n = bound > 2.0 ? static_cast<std::size_t>(bound) - 2 : 0;
  while (val_count(n, val_fraction) < window || n - val_count(n, val_fraction) < window) ++n;
  return n;
}

}  // namespace troupe::compute
