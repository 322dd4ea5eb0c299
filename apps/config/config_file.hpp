#pragma once
// Reads a job's configuration from a TOML file with sections [model], [train], [data] and
// [sample], one per JobConfig part, each holding that part's keys (keys.hpp). Keys the
// file leaves out keep their defaults. Anything the file says that Troupe would not use is an
// error, never a silent no-op: an unknown section or key, or a value of the wrong type or out of
// the field's range. Whether the values make a sensible job is resolve()'s question
// (resolve.hpp).

#include <string>

#include <toml++/toml.h>

#include "apps/config/job_config.hpp"
#include "compute/expected.hpp"

namespace troupe::apps {

// The defaults of JobConfig with the file at path applied. Errors are one line that starts with
// "path:line:" where the line is known, then names the key: unreadable file, TOML syntax error,
// unknown section or key (with the closest known one when a typo is likely), wrong type, out of
// range.
Expected<JobConfig> load_config(const std::string& path);
// Applies a parsed TOML document to config. origin starts each error message (a file name). When
// the document has several problems, the one nearest its top is reported.
Status apply_toml(JobConfig& config, const toml::table& table, const std::string& origin);

}  // namespace troupe::apps
