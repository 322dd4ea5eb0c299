#pragma once
// What a test waits for in a watched job's output: a line `pattern` finds something in. The
// runtime's own programs read typed events; only tests read the job's lines.

#include <regex>
#include <string>

#include "apps/commands/watched_run.hpp"

namespace troupe::test {

inline apps::WatchedRun::LineMatch matching(const std::string& pattern) {
  return [re = std::regex(pattern)](const std::string& line) { return std::regex_search(line, re); };
}

}  // namespace troupe::test
