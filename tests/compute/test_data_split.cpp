// Train/validation split of one token stream: sizes, order, errors, and the minimum length.

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

#include "compute/data/split.hpp"

using namespace troupe::compute;

namespace {
std::vector<std::uint16_t> iota_tokens(std::size_t n) {
  std::vector<std::uint16_t> tokens(n);
  std::iota(tokens.begin(), tokens.end(), std::uint16_t{0});
  return tokens;
}
}  // namespace

TEST_CASE("split gives the tail to validation, training first", "[data]") {
  const auto tokens = iota_tokens(1000);
  auto split = split_train_val(tokens, default_val_fraction, 10);
  REQUIRE(split.ok());
  CHECK(split->train.size() == 900);
  CHECK(split->val.size() == 100);
  CHECK(split->train.data() == tokens.data());
  CHECK(split->val.front() == 900);
  CHECK(split->val.back() == 999);

  auto quarter = split_train_val(iota_tokens(10), 0.25, 2);  // floor(2.5) = 2 validation tokens
  REQUIRE(quarter.ok());
  CHECK(quarter->train.size() == 8);
  CHECK(quarter->val.size() == 2);
}

TEST_CASE("split refuses fractions outside (0, 1) and parts shorter than a window", "[data]") {
  const auto tokens = iota_tokens(1000);
  for (double f : {0.0, 1.0, -0.1, 1.5, std::nan("")}) {
    auto split = split_train_val(tokens, f, 10);
    REQUIRE_FALSE(split.ok());
    CHECK_THAT(split.error().message, Catch::Contains("validation fraction"));
  }
  auto split = split_train_val(tokens, 0.1, 129);
  REQUIRE_FALSE(split.ok());
  CHECK_THAT(split.error().message, Catch::Contains("1000 tokens") && Catch::Contains("training part 900") &&
                                        Catch::Contains("validation part 100") && Catch::Contains("at least 129") &&
                                        Catch::Contains("at least 1290 tokens"));
}

TEST_CASE("min_tokens_for_split is the shortest stream that splits", "[data]") {
  for (double f : {0.1, 0.5, 0.25, 0.3, 0.9, 0.01}) {
    for (std::size_t window : {1, 2, 3, 65, 129, 1025}) {
      const std::size_t n = min_tokens_for_split(window, f);
      INFO("val_fraction " << f << ", window " << window << ", n " << n);
      CHECK(split_train_val(iota_tokens(n), f, window).ok());
      CHECK_FALSE(split_train_val(iota_tokens(n - 1), f, window).ok());
    }
  }
  CHECK(min_tokens_for_split(129, 0.1) == 1290);
}
