#pragma once
// Speeds as the user writes them, one relative speed a pipeline stage or a data-parallel replica,
// comma-separated: "1,0.5" is a second stage (replica) at half the first's speed. Read by
// pipeline.stage_speeds, train.replica_speeds and the --stage-speeds option of troupe schedule,
// troupe plan and troupe bench pipeline.

#include <string>
#include <string_view>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::apps {

// "1,0.5" → {1, 0.5}; empty → none. Every item must read as a whole number the way the config's
// numbers do (value.cpp: decimal, no spaces); an error names `input` ("pipeline.stage_speeds",
// "--stage-speeds") and the item, and says what a speed is of (`each`: "a stage", "a replica").
// Whether the values are positive is the caller's to say.
Expected<std::vector<double>> parse_speeds(std::string_view input, const std::string& text,
                                           std::string_view each = "a stage");

}  // namespace troupe::apps
