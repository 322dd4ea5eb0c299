#pragma once
// What a node must share with its job to be let in (docs/protocols/control-plane.md): the job's
// secret token, the same build, and the same resolved configuration.

#include <cstdint>
#include <string>

#include "apps/config/job_config.hpp"
#include "compute/expected.hpp"

namespace troupe::apps {

// "0.1.0+<git commit>" as configured; a node built from other sources differs.
std::string build_id();
// XXH64 of the configuration written as TOML (config_to_toml), so key order and number
// spelling in the user's file do not matter, only the values.
std::uint64_t config_hash(const JobConfig& config);
// 128 random bits from the kernel, as 32 hex digits.
Expected<std::string> new_job_token();

}  // namespace troupe::apps
