// Local-host detection by name only: no DNS lookup, so a host file never waits on a resolver.

#include "apps/launch/local_host.hpp"

#include <unistd.h>

#include <climits>
#include <string>
#include <string_view>

namespace troupe::launch {

std::string this_host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

namespace {

// /proc/self/exe's target, less the " (deleted)" the kernel adds once the file is gone; empty if it
// cannot be read.
std::string running_program_path() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) return {};
  std::string program(path, static_cast<std::size_t>(n));
  constexpr std::string_view deleted = " (deleted)";
  if (program.ends_with(deleted)) program.resize(program.size() - deleted.size());
  return program;
}

}  // namespace

std::string this_executable() {
  std::string program = running_program_path();
  return program.empty() ? std::string("troupe") : program;
}

std::string executable_to_spawn(const std::string& program) {
  const std::string running = running_program_path();
  return !running.empty() && program == running ? std::string("/proc/self/exe") : program;
}

bool is_local_host(std::string_view host, std::string_view this_host) {
  if (host == "localhost" || host == "127.0.0.1" || host == "::1") return true;
  if (this_host.empty()) return false;
  return host == this_host || host == this_host.substr(0, this_host.find('.'));
}

}  // namespace troupe::launch
