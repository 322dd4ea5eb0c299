#pragma once
// Byte-level tokens back to text that is safe to print on a terminal. A model samples arbitrary
// bytes; printed raw, an ESC byte starts a terminal escape sequence (colours, cursor moves, title
// changes) and stray bytes garble the line. So:
//   - \n and \t pass through, as do printable ASCII and valid UTF-8 multibyte sequences;
//   - other C0 control bytes and DEL become their Unicode control pictures (ESC -> U+241B "␛",
//     DEL -> U+2421 "␡"), so they stay visible;
//   - a C1 control character (U+0080..U+009F, which some terminals obey), a byte that does not
//     start a valid UTF-8 sequence, and a token id outside [0, 255] each become one U+FFFD "�".

#include <span>
#include <string>

namespace troupe::compute {

std::string decode_bytes(std::span<const int> tokens);

}  // namespace troupe::compute
