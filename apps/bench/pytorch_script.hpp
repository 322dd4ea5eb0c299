#pragma once
// Running one of scripts/bench/'s PyTorch scripts from a bench command: finding the script,
// checking the interpreter, and reading the figure the script prints ("tokens_per_s <value>").
// The scripts are the reference a bench compares against; they never run inside troupe.

#include <optional>
#include <string>
#include <vector>

namespace troupe::apps {

// scripts/bench/<name> of the source tree this troupe was built from: <dir of the running
// program>/../scripts/bench (a build folder inside the tree), else the tree CMake configured from.
// Empty when neither holds it.
std::string find_bench_script(const std::string& name);

// Whether `python` can be started: a path (with a '/') must be an executable file, a bare name
// an executable file in a folder of PATH.
bool is_executable_program(const std::string& python);

struct ScriptRun {
  int exit_code = -1;                  // the script's; -1 when it could not be started
  std::vector<std::string> lines;      // its output, stdout and stderr together, the last 8 lines
  std::optional<double> tokens_per_s;  // from its "tokens_per_s <value>" line
};

// Runs `python script args...`, waiting for it to finish.
ScriptRun run_python_script(const std::string& python, const std::string& script, const std::vector<std::string>& args);

}  // namespace troupe::apps
