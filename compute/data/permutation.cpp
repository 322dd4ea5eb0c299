#include "compute/data/permutation.hpp"

#include <string>

#include "compute/check.hpp"
#include "compute/random.hpp"

namespace troupe::compute {
namespace {

constexpr int feistel_rounds = 6;

// One pass of the Feistel network on a 2 * half_bits-bit value.
std::uint64_t feistel(std::uint64_t x, int half_bits, std::uint64_t key) {
  const std::uint64_t mask = (std::uint64_t{1} << half_bits) - 1;
  std::uint64_t left = x >> half_bits;
  std::uint64_t right = x & mask;
  for (int round = 0; round < feistel_rounds; ++round) {
    const std::uint64_t round_key = splitmix64(key + static_cast<std::uint64_t>(round));
    const std::uint64_t f = splitmix64(right ^ round_key) & mask;
    const std::uint64_t next_right = left ^ f;
    left = right;
    right = next_right;
  }
  return (left << half_bits) | right;
}

}  // namespace

std::uint64_t permute_index(std::uint64_t i, std::uint64_t n, std::uint64_t key) {
  TROUPE_CHECK(i < n, "index " + std::to_string(i) + " outside [0, " + std::to_string(n) + ")");
  int half_bits = 1;
  while (half_bits < 32 && (std::uint64_t{1} << (2 * half_bits)) < n) ++half_bits;
  std::uint64_t x = i;
  do {
    x = feistel(x, half_bits, key);
  } while (x >= n);
  return x;
}

}  // namespace troupe::compute
