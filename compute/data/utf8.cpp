#include "compute/data/utf8.hpp"

namespace troupe::compute {

Utf8Sequence utf8_sequence_at(std::span<const std::uint8_t> bytes, std::size_t pos) {
  const std::uint8_t lead = bytes[pos];
  if (lead < 0x80) return {1, lead};
  std::size_t length = 0;
  char32_t cp = 0;
  char32_t min_cp = 0;
  if ((lead & 0xE0) == 0xC0) {
    length = 2, cp = lead & 0x1F, min_cp = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    length = 3, cp = lead & 0x0F, min_cp = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    length = 4, cp = lead & 0x07, min_cp = 0x10000;
  } else {
    return {};  // a continuation byte or 0xF8..0xFF cannot start a sequence
  }
  if (bytes.size() - pos < length) return {};
  for (std::size_t k = 1; k < length; ++k) {
    const std::uint8_t b = bytes[pos + k];
    if ((b & 0xC0) != 0x80) return {};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {};
  return {length, cp};
}

std::size_t utf8_first_invalid(std::span<const std::uint8_t> bytes) {
  std::size_t pos = 0;
  while (pos < bytes.size()) {
    if (bytes[pos] < 0x80) {  // ASCII fast path: most corpus bytes
      ++pos;
      continue;
    }
    const Utf8Sequence seq = utf8_sequence_at(bytes, pos);
    if (seq.length == 0) return pos;
    pos += seq.length;
  }
  return bytes.size();
}

}  // namespace troupe::compute
