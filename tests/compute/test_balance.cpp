// Uneven data-parallel shares (compute/train/balance.hpp): integer shares in proportion to the
// weights, each at least one, summing to the global batch, the same on every call.

#include <catch2/catch.hpp>

#include <limits>
#include <numeric>
#include <vector>

#include "compute/train/balance.hpp"

using namespace troupe::compute;

namespace {

std::vector<int> shares(int units, std::vector<double> weights) {
  auto result = proportional_shares(units, weights);
  REQUIRE(result);
  CHECK(std::accumulate(result->begin(), result->end(), 0) == units);
  for (int share : *result) CHECK(share >= 1);
  return *result;
}

}  // namespace

TEST_CASE("shares follow the weights by largest remainder, each replica at least one unit", "[balance]") {
  CHECK(shares(4, {1, 1}) == std::vector<int>{2, 2});
  CHECK(shares(4, {1, 1.0 / 3}) == std::vector<int>{3, 1});
  CHECK(shares(8, {1, 0.5}) == std::vector<int>{5, 3});
  CHECK(shares(8, {0.5, 1}) == std::vector<int>{3, 5});
  CHECK(shares(12, {1, 0.5, 0.5}) == std::vector<int>{6, 3, 3});
  CHECK(shares(6, {1, 0.5, 0.25}) == std::vector<int>{3, 2, 1});
  // A replica far slower than the others still takes one unit.
  CHECK(shares(4, {1, 1e-6}) == std::vector<int>{3, 1});
  // Ties go to the lower replica: 5 units over 2 equal weights.
  CHECK(shares(5, {1, 1}) == std::vector<int>{3, 2});
  CHECK(shares(3, {2, 2, 2}) == std::vector<int>{1, 1, 1});
  // Weights are relative: scaling them all changes nothing.
  CHECK(shares(10, {3, 1, 1}) == shares(10, {0.3, 0.1, 0.1}));
}

TEST_CASE("a replica's first unit is the sum of the shares before it", "[balance]") {
  const std::vector<int> s{3, 1, 4};
  CHECK(first_unit(s, 0) == 0);
  CHECK(first_unit(s, 1) == 3);
  CHECK(first_unit(s, 2) == 4);
  CHECK(shares_text(s) == "3, 1, 4");
}

TEST_CASE("shares are refused for fewer units than replicas and for weights that are not positive", "[balance]") {
  CHECK_FALSE(proportional_shares(1, std::vector<double>{1, 1}));
  CHECK_FALSE(proportional_shares(4, std::vector<double>{}));
  CHECK_FALSE(proportional_shares(4, std::vector<double>{1, 0}));
  CHECK_FALSE(proportional_shares(4, std::vector<double>{1, -1}));
  CHECK_FALSE(proportional_shares(4, std::vector<double>{1, std::numeric_limits<double>::infinity()}));
  CHECK_FALSE(proportional_shares(4, std::vector<double>{1, std::numeric_limits<double>::quiet_NaN()}));
}
