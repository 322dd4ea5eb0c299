#pragma once
// Command-line overrides: every config key is also an option --section.name VALUE (or
// --section.name=VALUE) of `troupe train`, applied after the config file. The options come from
// the key table and are parsed by the same text reader as any key (value.hpp), so the
// command line and the TOML file accept the same keys.

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "apps/config/job_config.hpp"
#include "compute/expected.hpp"

namespace troupe::apps {

class ConfigOverrides {
 public:
  ConfigOverrides() = default;
  // The options added to a command hold pointers into this object.
  ConfigOverrides(const ConfigOverrides&) = delete;
  ConfigOverrides& operator=(const ConfigOverrides&) = delete;

  // Adds one option per key to command, one help group per section, each showing its default.
  // A key given twice takes the last value, so a script can append overrides.
  void add_options(CLI::App& command);
  // Sets every key the command line gave; errors start with "command line:" and name the key.
  Status apply(JobConfig& config) const;

 private:
  std::vector<std::string> values_;    // one per key, in key-table order
  std::vector<CLI::Option*> options_;  // the option that fills each value
};

}  // namespace troupe::apps
