// Token ids must fit the vocabulary; the error points at the first that does not.

#include <catch2/catch.hpp>
#include <cstdint>
#include <vector>

#include "compute/data/vocab_check.hpp"

using namespace troupe::compute;

TEST_CASE("check_tokens_fit names the first token outside the vocabulary", "[data]") {
  const std::vector<std::uint16_t> bytes = {0, 17, 255};
  CHECK(check_tokens_fit(bytes, 256, "corpus").ok());

  const std::vector<std::uint16_t> gpt2 = {10, 255, 256, 50256};
  troupe::Status s = check_tokens_fit(gpt2, 256, "data/train.bin");
  REQUIRE_FALSE(s.ok());
  CHECK_THAT(s.error().message, Catch::Contains("data/train.bin") && Catch::Contains("token id 256") &&
                                    Catch::Contains("position 2") && Catch::Contains("vocabulary of 256"));
  CHECK(check_tokens_fit(gpt2, 50257, "data/train.bin").ok());
}
