#include "apps/config/cli.hpp"

#include "apps/config/keys.hpp"
#include "apps/config/value.hpp"

namespace troupe::apps {
namespace {

std::string option_type(const ConfigKey& key) {
  const std::string_view type = type_name(key);
  if (type == "integer") return "INT";
  if (type == "number") return "FLOAT";
  return "TEXT";
}

}  // namespace

void ConfigOverrides::add_options(CLI::App& command) {
  const auto keys = config_keys();
  values_.assign(keys.size(), std::string());  // sized once: the options point at these strings
  options_.clear();
  JobConfig defaults;
  for (std::size_t i = 0; i < keys.size(); ++i) {
    const ConfigKey& key = keys[i];
    const std::string section(key.section());
    CLI::Option* option = command.add_option("--" + std::string(key.name), values_[i], std::string(key.help));
    option->type_name(option_type(key))
        ->default_str(format_value(defaults, key))
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
        ->group("[" + section + "] keys");
    options_.push_back(option);
  }
}

Status ConfigOverrides::apply(JobConfig& config) const {
  const auto keys = config_keys();
  for (std::size_t i = 0; i < options_.size(); ++i) {
    if (options_[i]->count() == 0) continue;
    if (Status set = set_from_text(config, keys[i], values_[i], "command line"); !set) return set;
  }
  return Status::success();
}

}  // namespace troupe::apps
