#pragma once
// Stage speeds as the user writes them, one relative speed a pipeline stage, comma-separated:
// "1,0.5" is a second stage at half the first's speed. Read by pipeline.stage_speeds and by the
// --stage-speeds option of troupe schedule, troupe plan and troupe bench pipeline.

#include <string>
#include <string_view>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::apps {

// "1,0.5" → {1, 0.5}; empty → none. Every item must read as a whole number the way the config's
// numbers do (value.cpp: decimal, no spaces); an error names `input` ("pipeline.stage_speeds",
// "--stage-speeds") and the item. Whether the values are positive is the splitter's to say.
Expected<std::vector<double>> parse_stage_speeds(std::string_view input, const std::string& text);

}  // namespace troupe::apps
