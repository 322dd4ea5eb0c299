#include "comm/knobs.hpp"

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace troupe::comm {

std::int64_t knob_value(const Knob& knob) {
  const char* text = std::getenv(knob.name);
  if (text == nullptr) return knob.fallback;
  std::int64_t value = 0;
  const char* end = text + std::strlen(text);
  const auto [ptr, ec] = std::from_chars(text, end, value);
  if (ec != std::errc{} || ptr != end || value < 0) return knob.fallback;
  return value;
}

}  // namespace troupe::comm
