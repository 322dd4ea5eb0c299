#pragma once
// Running the built troupe binary as a user would, for the tests of tests/apps/: in a test's
// own directory, output captured, killed if it outlives the timeout.

#include <chrono>
#include <string>
#include <vector>

#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

namespace troupe::test {

inline ProcessResult run_troupe(const TempDir& dir, std::vector<std::string> args,
                                std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  args.insert(args.begin(), TROUPE_BINARY_DIR "/troupe");
  return run_process(args, dir.path().string(), timeout);
}

}  // namespace troupe::test
