#pragma once
// Runs a program the way a user would, for tests of the troupe binary: in a given working
// directory, capturing stdout and stderr apart, killed if it outlives a timeout.

#include <chrono>
#include <string>
#include <vector>

namespace troupe::test {

struct ProcessResult {
  int exit_code = -1;  // -1 when killed by a signal (the timeout included)
  bool timed_out = false;
  std::string out;
  std::string err;
};

ProcessResult run_process(const std::vector<std::string>& argv, const std::string& working_dir,
                          std::chrono::milliseconds timeout);

}  // namespace troupe::test
