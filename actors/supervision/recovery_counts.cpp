#include "actors/supervision/recovery_counts.hpp"

#include <cstdlib>
#include <sstream>

namespace troupe::actors {

std::string RecoveryCounts::to_text() const {
  std::string text = "restarts=" + std::to_string(restarts);
  for (const auto& [kind, n] : failures) text += " failure." + kind + "=" + std::to_string(n);
  for (const auto& [source, n] : recoveries) text += " recovery." + source + "=" + std::to_string(n);
  return text;
}

Expected<RecoveryCounts> RecoveryCounts::parse(std::string_view text) {
  RecoveryCounts counts;
  std::istringstream in{std::string(text)};
  for (std::string item; in >> item;) {
    const auto equals = item.find('=');
    const std::string name = item.substr(0, equals);
    char* end = nullptr;
    const long value = equals == std::string::npos ? -1 : std::strtol(item.c_str() + equals + 1, &end, 10);
    if (value < 0 || *end != '\0')
      return Error{std::string(recovery_counts_variable) + ": '" + item + "' is not NAME=COUNT"};
    if (name == "restarts")
      counts.restarts = static_cast<int>(value);
    else if (name.rfind("failure.", 0) == 0 && name.size() > 8)
      counts.failures[name.substr(8)] = static_cast<int>(value);
    else if (name.rfind("recovery.", 0) == 0 && name.size() > 9)
      counts.recoveries[name.substr(9)] = static_cast<int>(value);
    else
      return Error{std::string(recovery_counts_variable) + ": unknown count '" + name + "'"};
  }
  return counts;
}

Expected<RecoveryCounts> RecoveryCounts::from_environment() {
  const char* text = std::getenv(recovery_counts_variable);
  return text ? parse(text) : RecoveryCounts{};
}

}  // namespace troupe::actors
