// Local-host detection by name only: no DNS lookup, so a host file never waits on a resolver.

#include "apps/launch/local_host.hpp"

#include <unistd.h>

#include <climits>

namespace troupe::launch {

std::string this_host_name() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  return name;
}

std::string this_executable() {
  char path[PATH_MAX];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  return n > 0 ? std::string(path, static_cast<std::size_t>(n)) : std::string("troupe");
}

bool is_local_host(std::string_view host, std::string_view this_host) {
  if (host == "localhost" || host == "127.0.0.1" || host == "::1") return true;
  if (this_host.empty()) return false;
  return host == this_host || host == this_host.substr(0, this_host.find('.'));
}

}  // namespace troupe::launch
