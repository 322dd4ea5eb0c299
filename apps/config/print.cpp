#include "apps/config/print.hpp"

#include "apps/config/keys.hpp"
#include "apps/config/value.hpp"

namespace troupe::apps {

std::string config_to_toml(const JobConfig& config) {
  std::string out;
  std::string_view section;
  for (const ConfigKey& key : config_keys()) {
    if (key.section() != section) {
      section = key.section();
      out += (out.empty() ? "[" : "\n[") + std::string(section) + "]\n";
    }
    out += std::string(key.leaf()) + " = " + format_value(config, key) + "\n";
  }
  return out;
}

std::string config_keys_markdown() {
  const JobConfig defaults;
  std::string out = "| Key | Type | Default | Meaning |\n|---|---|---|---|\n";
  for (const ConfigKey& key : config_keys()) {
    out += "| `" + std::string(key.name) + "` | " + std::string(type_name(key)) + " | `" + format_value(defaults, key) +
           "` | " + std::string(key.help) + " |\n";
  }
  return out;
}

}  // namespace troupe::apps
