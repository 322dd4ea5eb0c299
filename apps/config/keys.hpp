#pragma once
// The one table of configuration keys. The TOML loader, the command-line options, --help and
// docs/configuration.md all read it, so a key cannot be settable in one place and missing from
// another, and its help line is written once.

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "apps/config/job_config.hpp"

namespace troupe::apps {

// Where a key's value lives inside a JobConfig; the pointee's type is the key's type. A policy
// with a few values is its enum from here on: train.zero a number to the user, the others one of
// their names (named_choice.hpp).
using ConfigField =
    std::variant<bool*, int*, long*, std::uint64_t*, double*, std::string*, compute::ZeroStage*, compute::BackendKind*,
                 compute::Precision*, compute::Recompute*, compute::SyncMode*, compute::OuterPrecision*,
                 compute::BalanceMode*, schedules::ScheduleKind*, compute::SplitMethod*,
                 compute::context::ContextMethod*, comm::Compression*, actors::RecoveryMode*, monitor::LogFormat*>;

struct ConfigKey {
  std::string_view name;  // "section.name"
  std::string_view help;  // one line, for --help and the docs
  ConfigField (*field)(JobConfig&);

  std::string_view section() const { return name.substr(0, name.find('.')); }
  std::string_view leaf() const { return name.substr(name.find('.') + 1); }
};

// An old spelling of a value that now sets more than one key: train.backend "cuda-bf16" is
// train.backend cuda with train.precision bf16. Both parsers read it as the keys it means, in
// order, and the job log says so once (value.hpp, apply_value_alias).
struct ValueAlias {
  std::string_view key;                                                  // "train.backend"
  std::string_view value;                                                // "cuda-bf16"
  std::span<const std::pair<std::string_view, std::string_view>> means;  // {key, value} set in turn
};

// The alias of key spelt value, or nullptr.
const ValueAlias* find_value_alias(std::string_view key, std::string_view value);

// Every key, grouped by section in the order model, train, data, sample.
std::span<const ConfigKey> config_keys();
// The section names in table order.
std::vector<std::string> config_sections();
// The key called name ("train.steps"), or nullptr.
const ConfigKey* find_config_key(std::string_view name);
// The known key, or section, a misspelt name most likely meant (see closest_match).
std::optional<std::string> closest_config_key(std::string_view name);
std::optional<std::string> closest_config_section(std::string_view name);
// "integer", "number", "string" or "boolean": how messages and docs name a key's type (a named
// choice is a string).
std::string_view type_name(const ConfigKey& key);

}  // namespace troupe::apps
