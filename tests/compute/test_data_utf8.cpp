// Strict UTF-8 validation (RFC 3629).

#include <catch2/catch.hpp>
#include <cstdint>
#include <span>
#include <string>

#include "compute/data/utf8.hpp"

using namespace troupe::compute;

namespace {
std::size_t first_invalid(const std::string& s) {
  return utf8_first_invalid(std::span(reinterpret_cast<const std::uint8_t*>(s.data()), s.size()));
}
}  // namespace

TEST_CASE("utf8 accepts valid sequences and decodes their code points", "[data]") {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xF4\x8F\xBF\xBF";
  CHECK(first_invalid(s) == s.size());
  const std::span bytes(reinterpret_cast<const std::uint8_t*>(s.data()), s.size());
  CHECK(utf8_sequence_at(bytes, 1).code_point == U'\u00E9');
  CHECK(utf8_sequence_at(bytes, 3).code_point == U'\u20AC');
  CHECK(utf8_sequence_at(bytes, 6).code_point == U'\U0001F600');
  CHECK(utf8_sequence_at(bytes, 10).code_point == U'\U0010FFFF');
}

TEST_CASE("utf8 rejects malformed sequences at their first byte", "[data]") {
  CHECK(first_invalid("ab\x80") == 2);                 // stray continuation byte
  CHECK(first_invalid("a\xC3") == 1);                  // truncated at the end
  CHECK(first_invalid("\xC1\xBF") == 0);               // overlong 2-byte form
  CHECK(first_invalid("\xE0\x80\xAF") == 0);           // overlong 3-byte form
  CHECK(first_invalid("\xED\xBF\xBF") == 0);           // surrogate U+DFFF
  CHECK(first_invalid("\xF4\x90\x80\x80") == 0);       // above U+10FFFF
  CHECK(first_invalid("x\xF8\x88\x80\x80\x80") == 1);  // 5-byte forms do not exist
}
