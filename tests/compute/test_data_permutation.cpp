// The keyed permutation of [0, n): a bijection for every n and key, and different keys give
// different orders.

#include <catch2/catch.hpp>
#include <cstdint>
#include <limits>
#include <set>
#include <vector>

#include "compute/data/permutation.hpp"

using namespace troupe::compute;

namespace {
std::vector<std::uint64_t> image(std::uint64_t n, std::uint64_t key) {
  std::vector<std::uint64_t> out(n);
  for (std::uint64_t i = 0; i < n; ++i) out[i] = permute_index(i, n, key);
  return out;
}
}  // namespace

TEST_CASE("permute_index is a bijection on 0..n-1", "[data]") {
  // 1, 2, 3 and small powers of four probe the edges of the Feistel domain; 7919 is prime.
  for (std::uint64_t n : {1, 2, 3, 4, 5, 15, 16, 17, 64, 65, 1000, 7919, 65537}) {
    for (std::uint64_t key : {0ull, 1ull, 0xDEADBEEFull}) {
      INFO("n " << n << ", key " << key);
      const auto out = image(n, key);
      std::vector<bool> seen(n, false);
      for (std::uint64_t v : out) {
        REQUIRE(v < n);
        REQUIRE_FALSE(seen[v]);
        seen[v] = true;
      }
    }
  }
}

TEST_CASE("permute_index orders differ between keys and are not the identity", "[data]") {
  const auto a = image(1000, 1);
  const auto b = image(1000, 2);
  CHECK(a != b);
  std::size_t fixed_points = 0;
  for (std::uint64_t i = 0; i < a.size(); ++i) fixed_points += a[i] == i;
  CHECK(fixed_points < 20);  // a random permutation has 1 on average
}

TEST_CASE("permute_index works up to the largest n", "[data]") {
  for (std::uint64_t n : {std::uint64_t{1} << 40, std::numeric_limits<std::uint64_t>::max()}) {
    std::set<std::uint64_t> seen;
    for (std::uint64_t i = 0; i < 1000; ++i) {
      const std::uint64_t v = permute_index(n - 1 - i, n, 42);
      CHECK(v < n);
      seen.insert(v);
    }
    CHECK(seen.size() == 1000);
  }
}
