#pragma once
// Reading one variable of the process environment as a checked value. Unset, the caller's
// default applies; set to something the variable does not take, the answer is one error line
// that names the variable and its value,
//
//   environment variable RANK: expected an integer >= 0, got 'abc'
//
// never atoi's 0 and never a silent fall-back to the default. The variables themselves are
// declared where their users are: comm/knobs.hpp (TROUPE_COMM_*) and actors/process_environment.hpp
// (the job's); both read through these, so every variable fails in the same words. Header-only,
// here in compute/ because it is the one folder both may include.

#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

#include "compute/expected.hpp"

namespace troupe {

// The variable's value; nothing when it is unset.
inline std::optional<std::string> environment_text(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

// "environment variable NAME: expected EXPECTED, got 'VALUE'"
inline Error environment_error(std::string_view name, std::string_view expected, std::string_view value) {
  return Error{"environment variable " + std::string(name) + ": expected " + std::string(expected) + ", got '" +
               std::string(value) + "'"};
}

// A whole decimal number in [min, max] (digits with an optional '-', nothing else); else the
// error line, which gives the bound the value missed ("an integer >= 1", "an integer <= 65535").
inline Expected<std::int64_t> parse_environment_integer(std::string_view name, std::string_view text, std::int64_t min,
                                                        std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  const bool digits = end == text.data() + text.size() && end != text.data();
  const bool whole = digits && ec == std::errc{};
  const bool too_large = digits && ec == std::errc::result_out_of_range && text.front() != '-';
  if ((whole && value > max) || too_large) return environment_error(name, "an integer <= " + std::to_string(max), text);
  if (!whole || value < min) {
    const bool bounded = min > std::numeric_limits<std::int64_t>::min();
    return environment_error(name, bounded ? "an integer >= " + std::to_string(min) : "an integer", text);
  }
  return value;
}

// The integer variable `name`: `fallback` when unset, else its value when it is a whole number in
// [min, max], else the error line.
inline Expected<std::int64_t> environment_integer(const char* name, std::int64_t fallback, std::int64_t min,
                                                  std::int64_t max = std::numeric_limits<std::int64_t>::max()) {
  const std::optional<std::string> text = environment_text(name);
  if (!text) return fallback;
  return parse_environment_integer(name, *text, min, max);
}

}  // namespace troupe
