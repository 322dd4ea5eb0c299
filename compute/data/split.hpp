#pragma once
// One token stream split into a training part and a validation part, training first (as
// nanoGPT's prepare scripts do: the validation text is the stream's tail, never seen in
// training). Contiguous halves rather than interleaved chunks keep windows from straddling the
// boundary, so no validation token is ever a training target.
//
// The validation part holds floor(n * val_fraction) tokens, the training part the rest.

#include <cstddef>
#include <cstdint>
#include <span>

#include "compute/expected.hpp"

namespace troupe::compute {

inline constexpr double default_val_fraction = 0.1;

// Views into the stream passed to split_train_val; the caller keeps that stream alive.
struct TokenSplit {
  std::span<const std::uint16_t> train;
  std::span<const std::uint16_t> val;
};

// Errors: val_fraction outside (0, 1), or a part shorter than `window` tokens (the T + 1 tokens
// of one training window); the message gives both part sizes.
Expected<TokenSplit> split_train_val(std::span<const std::uint16_t> tokens, double val_fraction, std::size_t window);

// The smallest stream length for which split_train_val gives both parts at least `window`
// tokens; pass it as min_tokens to the corpus loader. val_fraction must lie in (0, 1).
std::size_t min_tokens_for_split(std::size_t window, double val_fraction);

}  // namespace troupe::compute
