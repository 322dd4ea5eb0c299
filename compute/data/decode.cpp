#include "compute/data/decode.hpp"

#include <cstdint>
#include <vector>

#include "compute/data/utf8.hpp"

namespace troupe::compute {
namespace {

constexpr const char* replacement_character = "\xEF\xBF\xBD";  // U+FFFD

void append_utf8(std::string& out, char32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

}  // namespace

std::string decode_bytes(std::span<const int> tokens) {
  // Out-of-range ids become a 0xFF byte, which never starts a valid UTF-8 sequence.
  std::vector<std::uint8_t> bytes;
  bytes.reserve(tokens.size());
  for (const int t : tokens) bytes.push_back(t >= 0 && t <= 255 ? static_cast<std::uint8_t>(t) : 0xFF);

  std::string out;
  out.reserve(bytes.size());
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    const std::uint8_t b = bytes[pos];
    if (b == '\n' || b == '\t' || (b >= 0x20 && b < 0x7F)) {
      out += static_cast<char>(b);
      ++pos;
    } else if (b < 0x20) {
      append_utf8(out, 0x2400 + b);  // control pictures: U+2400 NUL .. U+241F US
      ++pos;
    } else if (b == 0x7F) {
      append_utf8(out, 0x2421);
      ++pos;
    } else {
      const Utf8Sequence seq = utf8_sequence_at(bytes, pos);
      if (seq.length == 0 || (seq.code_point >= 0x80 && seq.code_point <= 0x9F)) {
        out += replacement_character;
        pos += seq.length == 0 ? 1 : seq.length;
      } else {
        out.append(reinterpret_cast<const char*>(&bytes[pos]), seq.length);
        pos += seq.length;
      }
    }
  }
  return out;
}

}  // namespace troupe::compute
