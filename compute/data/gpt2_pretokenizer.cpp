#include "compute/data/gpt2_pretokenizer.hpp"

#include <cstdint>
#include <span>

#include "compute/data/unicode_class.hpp"
#include "compute/data/utf8.hpp"

namespace troupe::compute {
namespace {

struct CodePoint {
  char32_t value;
  std::size_t length;  // bytes
  CodePointClass klass;
};

class Cursor {
 public:
  explicit Cursor(std::string_view text) : bytes_(reinterpret_cast<const std::uint8_t*>(text.data()), text.size()) {}

  std::size_t size() const { return bytes_.size(); }
  CodePoint at(std::size_t pos) const {
    if (bytes_[pos] < 0x80) {
      const char32_t c = bytes_[pos];
      return {c, 1, code_point_class(c)};
    }
    const Utf8Sequence s = utf8_sequence_at(bytes_, pos);
    if (s.length == 0) return {0xFFFD, 1, CodePointClass::other};
    return {s.code_point, s.length, code_point_class(s.code_point)};
  }
  // The end of the run of `klass` that starts at `pos`.
  std::size_t run_end(std::size_t pos, CodePointClass klass) const {
    while (pos < size()) {
      const CodePoint c = at(pos);
      if (c.klass != klass) break;
      pos += c.length;
    }
    return pos;
  }
  char byte(std::size_t pos) const { return pos < size() ? static_cast<char>(bytes_[pos]) : '\0'; }

 private:
  std::span<const std::uint8_t> bytes_;
};

// 's 't 're 've 'm 'll 'd at `pos` (which holds the apostrophe): the piece's length, or 0.
std::size_t contraction(const Cursor& text, std::size_t pos) {
  const char a = text.byte(pos + 1);
  const char b = text.byte(pos + 2);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

}  // namespace

void gpt2_pretokenize(std::string_view text, std::vector<std::string_view>& out) {
  const Cursor cursor(text);
  std::size_t pos = 0;
  while (pos < cursor.size()) {
    const CodePoint first = cursor.at(pos);
    const std::size_t contracted = first.value == '\'' ? contraction(cursor, pos) : 0;
    std::size_t end = pos + contracted;
    if (contracted == 0) {
      // " ?X+" for letters, numbers and other symbols: the one space joins the run after it.
      std::size_t start = pos;
      CodePointClass klass = first.klass;
      if (first.value == ' ' && pos + 1 < cursor.size()) {
        const CodePoint next = cursor.at(pos + 1);
        if (next.klass != CodePointClass::space) {
          start = pos + 1;
          klass = next.klass;
        }
      }
      if (klass != CodePointClass::space) {
        end = cursor.run_end(start, klass);
      } else {
        // "\s+(?!\S)|\s+": a run of white space followed by more text leaves its last code point
        // to what follows, unless the run is that one code point.
        std::size_t last = pos;
        end = pos;
        while (end < cursor.size()) {
          const CodePoint c = cursor.at(end);
          if (c.klass != CodePointClass::space) break;
          last = end;
          end += c.length;
        }
        if (end < cursor.size() && last > pos) end = last;
      }
    }
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
}

}  // namespace troupe::compute
