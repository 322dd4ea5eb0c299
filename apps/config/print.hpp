#pragma once
// Writing configuration out, from the key table: a config as a TOML file (troupe train
// --print-config) and the table of every key for docs/configuration.md (troupe train
// --print-keys), which a test compares with the document so the two cannot drift apart.

#include <string>

#include "apps/config/job_config.hpp"

namespace troupe::apps {

// config as a TOML document with every key, one section per JobConfig part; load_config reads it
// back to the same values.
std::string config_to_toml(const JobConfig& config);
// A markdown table of every key: key, type, default, meaning.
std::string config_keys_markdown();

}  // namespace troupe::apps
