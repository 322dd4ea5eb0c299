#pragma once
// UTF-8 validation, shared by the text-corpus loader (which takes only valid UTF-8 files) and
// decode_bytes (which passes valid multibyte sequences through to the terminal). Strict as
// RFC 3629: overlong forms, UTF-16 surrogates and code points above U+10FFFF are invalid.

#include <cstddef>
#include <cstdint>
#include <span>

namespace troupe::compute {

struct Utf8Sequence {
  std::size_t length = 0;  // bytes of the sequence starting at `pos`; 0 when invalid there
  char32_t code_point = 0;
};

// Decodes the sequence that starts at bytes[pos] (pos < bytes.size()).
Utf8Sequence utf8_sequence_at(std::span<const std::uint8_t> bytes, std::size_t pos);

// Offset of the first byte that does not start a valid sequence; bytes.size() when all valid.
std::size_t utf8_first_invalid(std::span<const std::uint8_t> bytes);

}  // namespace troupe::compute
