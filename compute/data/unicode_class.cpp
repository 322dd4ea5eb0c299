#include "compute/data/unicode_class.hpp"

#include <algorithm>
#include <iterator>

namespace troupe::compute {
namespace {

struct CodePointRange {
  char32_t first;
  char32_t last;  // inclusive
};

#include "compute/data/unicode_class_table.inc"

// Unicode's White_Space property (PropList.txt), which \s matches.
constexpr CodePointRange space_ranges[] = {{0x09, 0x0D},     {0x20, 0x20},     {0x85, 0x85},     {0xA0, 0xA0},
                                           {0x1680, 0x1680}, {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F},
                                           {0x205F, 0x205F}, {0x3000, 0x3000}};

template <std::size_t N>
bool in(const CodePointRange (&ranges)[N], char32_t cp) {
  const auto* after = std::upper_bound(std::begin(ranges), std::end(ranges), cp,
                                       [](char32_t x, const CodePointRange& r) { return x < r.first; });
  return after != std::begin(ranges) && cp <= std::prev(after)->last;
}

}  // namespace

CodePointClass code_point_class(char32_t cp) {
  if (cp < 0x80) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return CodePointClass::letter;
    if (cp >= '0' && cp <= '9') return CodePointClass::number;
    if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return CodePointClass::space;
    return CodePointClass::other;
  }
  if (in(space_ranges, cp)) return CodePointClass::space;
  if (in(letter_ranges, cp)) return CodePointClass::letter;
  if (in(number_ranges, cp)) return CodePointClass::number;
  return CodePointClass::other;
}

}  // namespace troupe::compute
