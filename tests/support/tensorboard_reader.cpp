#include "support/tensorboard_reader.hpp"

#include <chrono>
#include <cstdio>

namespace troupe::test {

std::optional<ProcessResult> read_with_tensorboard(const std::string& script, const std::string& run_dir,
                                                   const std::string& test_name) {
  ProcessResult read = run_process({"/usr/bin/env", "python3", script, run_dir}, run_dir, std::chrono::seconds(120));
  if (read.exit_code != 77) return read;
  std::printf("SKIPPED (needs the tensorboard Python package: pip install tensorboard): %s (%s)\n", test_name.c_str(),
              read.err.c_str());
  return std::nullopt;
}

}  // namespace troupe::test
