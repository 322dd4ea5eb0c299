#include "actors/monitor/control_token.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace troupe::actors {

namespace fs = std::filesystem;

fs::path default_control_token_path(int control_port) {
  const char* runtime = std::getenv("XDG_RUNTIME_DIR");
  const char* home = std::getenv("HOME");
  const fs::path folder = runtime && *runtime ? fs::path(runtime) / "troupe" : fs::path(home ? home : ".") / ".troupe";
  return folder / ("job-" + std::to_string(control_port) + ".token");
}

Expected<std::string> read_control_token(const fs::path& path) {
  std::ifstream in(path);
  if (!in) return Error{"cannot read the token file " + path.string() + ": " + std::strerror(errno)};
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  if (token.empty()) return Error{"the token file " + path.string() + " is empty"};
  return token;
}

Expected<std::unique_ptr<ControlTokenFile>> ControlTokenFile::write(fs::path path, const std::string& token) {
  const fs::path folder = path.parent_path();
  if (!folder.empty() && ::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST)
    return Error{"cannot make the token folder " + folder.string() + ": " + std::strerror(errno)};
  // A stale file of an earlier job on this port is replaced; O_NOFOLLOW refuses a planted link.
  ::unlink(path.c_str());
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Error{"cannot write the token file " + path.string() + ": " + std::strerror(errno)};
  const std::string line = token + "\n";
  const bool written = ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
  ::close(fd);
  if (!written) return Error{"cannot write the token file " + path.string() + ": " + std::strerror(errno)};
  return std::unique_ptr<ControlTokenFile>(new ControlTokenFile(std::move(path)));
}

ControlTokenFile::~ControlTokenFile() { ::unlink(path_.c_str()); }

}  // namespace troupe::actors
