#include "compute/data/vocab_check.hpp"

#include <algorithm>

namespace troupe::compute {

Status check_tokens_fit(std::span<const std::uint16_t> tokens, int vocab_size, const std::string& what) {
  const auto bad = std::find_if(tokens.begin(), tokens.end(), [&](std::uint16_t t) { return int{t} >= vocab_size; });
  if (bad == tokens.end()) return Status::success();
  return Error{what + ": token id " + std::to_string(*bad) + " at position " + std::to_string(bad - tokens.begin()) +
               " is outside the vocabulary of " + std::to_string(vocab_size) + " tokens (ids 0.." +
               std::to_string(vocab_size - 1) + ")"};
}

}  // namespace troupe::compute
