#include "compute/data/synthetic_tokens.hpp"

#include "compute/random.hpp"

namespace troupe::compute {

std::vector<std::uint16_t> synthetic_tokens(std::size_t count, int vocab_size) {
  std::vector<std::uint16_t> stream(count);
  for (std::size_t i = 0; i < stream.size(); ++i)
    stream[i] = static_cast<std::uint16_t>(splitmix64(i) % static_cast<std::uint64_t>(vocab_size));
  return stream;
}

}  // namespace troupe::compute
