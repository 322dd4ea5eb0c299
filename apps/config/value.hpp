#pragma once
// A config key's value as text: parsed from a command-line override, and written as a TOML
// literal for --help, --print-config and the docs. The TOML loader reads typed TOML values
// instead (config_file.hpp) but reports problems in the same words.

#include <string>
#include <string_view>
#include <vector>

#include "apps/config/keys.hpp"
#include "compute/expected.hpp"

namespace troupe::apps {

// Sets key in config from text ("8", "1e-3", "cpu"). The error is one line that starts with
// origin, names the key and says what is wrong: "command line: train.steps: expected an integer,
// got 'ten'".
Status set_from_text(JobConfig& config, const ConfigKey& key, std::string_view text, std::string_view origin);
// Sets the keys alias means, each as set_from_text would, and says once in the job log (once a
// process) which keys the old spelling stands for. set_from_text calls it for an alias's text;
// the TOML loader calls it for an alias's string.
Status apply_value_alias(JobConfig& config, const ValueAlias& alias, std::string_view origin);
// The key's value in config as a TOML literal: 8, 0.001, "cpu".
std::string format_value(const JobConfig& config, const ConfigKey& key);
// The key's value as set_from_text reads it back: 8, 0.001, cpu.
std::string format_text(const JobConfig& config, const ConfigKey& key);
// Every key of config as command-line overrides ("--train.steps=8"), so that a process given them
// resolves the same configuration, whatever file it reads.
std::vector<std::string> override_arguments(const JobConfig& config);
// The shortest text that reads back as value, in printf %g style and always with a '.' or an
// exponent, so TOML reads it as a float: 0.001, 0.0001, 1e-08, 2.0.
std::string format_number(double value);

}  // namespace troupe::apps
