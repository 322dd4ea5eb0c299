#pragma once
// Internal invariants. A failed check is a bug in Troupe, not a user error: it throws
// std::logic_error naming the file, line and condition so the failure is loud and located.
// User errors travel as troupe::Error values instead (see expected.hpp).

#include <sstream>
#include <stdexcept>
#include <string>

namespace troupe::detail {
[[noreturn]] inline void check_failed(const char* file, int line, const char* cond, const std::string& what) {
  std::ostringstream os;
  os << "internal check failed at " << file << ':' << line << ": " << cond;
  if (!what.empty()) os << " (" << what << ')';
  throw std::logic_error(os.str());
}
}  // namespace troupe::detail

#define TROUPE_CHECK(cond, ...)                                                                \
  do {                                                                                         \
    if (!(cond)) ::troupe::detail::check_failed(__FILE__, __LINE__, #cond, std::string{__VA_ARGS__}); \
  } while (0)
