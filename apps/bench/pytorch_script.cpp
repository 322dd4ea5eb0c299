#include "apps/bench/pytorch_script.hpp"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <filesystem>
#include <memory>
#include <sstream>

#include "apps/launch/local_host.hpp"

namespace troupe::apps {
namespace {

namespace fs = std::filesystem;

// `text` as one word for sh: in single quotes, each ' written as '\''.
std::string shell_quoted(const std::string& text) {
  std::string quoted = "'";
  for (const char c : text) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

bool executable_file(const fs::path& path) {
  struct stat info {};
  return ::stat(path.c_str(), &info) == 0 && S_ISREG(info.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

}  // namespace

std::string find_bench_script(const std::string& name) {
  std::vector<fs::path> roots{fs::path(launch::this_executable()).parent_path() / ".."};
#ifdef TROUPE_SOURCE_DIR
  roots.emplace_back(TROUPE_SOURCE_DIR);
#endif
  for (const fs::path& root : roots) {
    std::error_code ec;
    const fs::path script = fs::weakly_canonical(root / "scripts" / "bench" / name, ec);
    if (!ec && fs::is_regular_file(script, ec)) return script.string();
  }
  return {};
}

bool is_executable_program(const std::string& python) {
  if (python.empty()) return false;
  if (python.find('/') != std::string::npos) return executable_file(python);
  const char* path = std::getenv("PATH");
  std::istringstream folders(path != nullptr ? path : "/usr/bin:/bin");
  for (std::string folder; std::getline(folders, folder, ':');)
    if (executable_file(fs::path(folder.empty() ? "." : folder) / python)) return true;
  return false;
}

ScriptRun run_python_script(const std::string& python, const std::string& script,
                            const std::vector<std::string>& args) {
  std::string command = shell_quoted(python) + " " + shell_quoted(script);
  for (const std::string& arg : args) command += " " + shell_quoted(arg);
  command += " 2>&1";
  ScriptRun run;
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 1024> line{};
  std::deque<std::string> tail;
  while (std::fgets(line.data(), line.size(), pipe) != nullptr) {
    double value = 0;
    if (std::sscanf(line.data(), "tokens_per_s %lf", &value) == 1) run.tokens_per_s = value;
    std::string text = line.data();
    if (!text.empty() && text.back() == '\n') text.pop_back();
    tail.push_back(std::move(text));
    if (tail.size() > 8) tail.pop_front();
  }
  const int status = ::pclose(pipe);
  run.exit_code = status >= 0 && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  run.lines.assign(tail.begin(), tail.end());
  return run;
}

}  // namespace troupe::apps
