// decode_bytes: text passes through, nothing that steers a terminal gets out, and the output is
// always valid UTF-8.

#include <catch2/catch.hpp>
#include <cstdint>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "compute/data/decode.hpp"
#include "compute/data/utf8.hpp"

using namespace troupe::compute;

namespace {

std::string decode(const std::string& bytes) {
  std::vector<int> tokens(bytes.begin(), bytes.end());
  for (int& t : tokens) t &= 0xFF;
  return decode_bytes(tokens);
}

// Valid UTF-8 with no C0 control except \n and \t, no DEL and no C1 control.
void check_terminal_safe(const std::string& text) {
  const auto* data = reinterpret_cast<const std::uint8_t*>(text.data());
  const std::span<const std::uint8_t> bytes(data, text.size());
  REQUIRE(utf8_first_invalid(bytes) == bytes.size());
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const Utf8Sequence seq = utf8_sequence_at(bytes, pos);
    const char32_t cp = seq.code_point;
    REQUIRE((cp == '\n' || cp == '\t' || (cp >= 0x20 && cp != 0x7F && (cp < 0x80 || cp > 0x9F))));
    pos += seq.length;
  }
}

}  // namespace

TEST_CASE("decode_bytes passes text through", "[data]") {
  CHECK(decode("hello,\n\tworld ~") == "hello,\n\tworld ~");
  const std::string multibyte = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x98\x80";  // é, €, an emoji
  CHECK(decode(multibyte) == multibyte);
}

TEST_CASE("decode_bytes shows control bytes as control pictures", "[data]") {
  CHECK(decode("\x1B[31mred") == "\u241B[31mred");
  CHECK(decode("a\rb") == "a\u240Db");
  CHECK(decode(std::string(1, '\0')) == "\u2400");
  CHECK(decode("\x7F") == "\u2421");
  CHECK(decode("x\by") == "x\u2408y");  // backspace, as in the overstrikes of some fortunes
}

TEST_CASE("decode_bytes replaces what is not valid UTF-8 or is a C1 control", "[data]") {
  const std::string r = "\uFFFD";
  CHECK(decode("caf\xE9!") == "caf" + r + "!");                 // Latin-1 byte
  CHECK(decode(std::string("\xE2\x82") + "a") == r + r + "a");  // truncated sequence
  CHECK(decode("\xC0\xAF") == r + r);                           // overlong '/'
  CHECK(decode("\xED\xA0\x80") == r + r + r);                   // UTF-16 surrogate
  CHECK(decode(std::string("\xC2\x9B") + "2J") == r + "2J");    // C1 CSI: one character, one U+FFFD
  CHECK(decode_bytes(std::vector<int>{'a', 256, -1, 'b'}) == "a" + r + r + "b");
}

TEST_CASE("decode_bytes output is terminal-safe for any bytes", "[data]") {
  for (int b = 0; b < 256; ++b) check_terminal_safe(decode_bytes(std::vector<int>{b}));
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> byte(0, 255);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<int> tokens(64);
    for (int& t : tokens) t = byte(rng);
    check_terminal_safe(decode_bytes(tokens));
  }
}
