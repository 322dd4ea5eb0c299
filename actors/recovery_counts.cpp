#include "actors/recovery_counts.hpp"

#include <sstream>

#include "actors/job_options.hpp"

namespace troupe::actors {

std::string_view to_string(RecoverySource source) {
  switch (source) {
    case RecoverySource::replica: return "replica";
    case RecoverySource::checkpoint: return "checkpoint";
    case RecoverySource::shrink: return "shrink";
    case RecoverySource::grow: return "grow";
    case RecoverySource::in_place: return to_string(RecoveryMode::in_place);
  }
  return "unknown";
}

std::optional<RecoverySource> parse_recovery_source(std::string_view name) {
  for (RecoverySource source : {RecoverySource::replica, RecoverySource::checkpoint, RecoverySource::shrink,
                                RecoverySource::grow, RecoverySource::in_place})
    if (to_string(source) == name) return source;
  return std::nullopt;
}

std::string RecoveryCounts::to_text() const {
  std::string text = "restarts=" + std::to_string(restarts);
  for (const auto& [kind, n] : failures) text += " failure." + std::string(to_string(kind)) + "=" + std::to_string(n);
  for (const auto& [source, n] : recoveries)
    text += " recovery." + std::string(to_string(source)) + "=" + std::to_string(n);
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
    if (name == "restarts") {
      counts.restarts = static_cast<int>(value);
    } else if (name.rfind("failure.", 0) == 0 && name.size() > 8) {
      const auto kind = parse_failure_kind(name.substr(8));
      if (!kind)
        return Error{std::string(recovery_counts_variable) + ": unknown failure kind '" + name.substr(8) + "'"};
      counts.failures[*kind] = static_cast<int>(value);
    } else if (name.rfind("recovery.", 0) == 0 && name.size() > 9) {
      const auto source = parse_recovery_source(name.substr(9));
      if (!source)
        return Error{std::string(recovery_counts_variable) + ": unknown recovery source '" + name.substr(9) + "'"};
      counts.recoveries[*source] = static_cast<int>(value);
    } else {
      return Error{std::string(recovery_counts_variable) + ": unknown count '" + name + "'"};
    }
  }
  return counts;
}

}  // namespace troupe::actors
