#include "actors/control/control_token.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <regex>

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

int remove_unheld_control_tokens(const fs::path& folder) {
  static const std::regex token_name("job-[0-9]+\\.token");
  std::error_code error;
  int removed = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(folder, error)) {
    if (!std::regex_match(entry.path().filename().string(), token_name)) continue;
    const int fd = ::open(entry.path().c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) continue;
    // Taking the lock proves no live job holds the file; it is removed while still locked.
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0 && ::unlink(entry.path().c_str()) == 0) ++removed;
    ::close(fd);
  }
  return removed;
}

Expected<std::unique_ptr<ControlTokenFile>> ControlTokenFile::write(fs::path path, const std::string& token) {
  const fs::path folder = path.parent_path();
  if (!folder.empty() && ::mkdir(folder.c_str(), 0700) != 0 && errno != EEXIST)
    return Error{"cannot make the token folder " + folder.string() + ": " + std::strerror(errno)};
  const int stale = remove_unheld_control_tokens(folder.empty() ? fs::path(".") : folder);
  // The file is written and locked under a name the clean-up passes over, then renamed into
  // place, so no other job's clean-up can take it for a leftover. O_NOFOLLOW refuses a planted link.
  const fs::path staging = path.string() + ".tmp";
  ::unlink(staging.c_str());
  const int fd = ::open(staging.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return Error{"cannot write the token file " + path.string() + ": " + std::strerror(errno)};
  const std::string line = token + "\n";
  const bool written = ::flock(fd, LOCK_EX | LOCK_NB) == 0 &&
                       ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size()) &&
                       ::rename(staging.c_str(), path.c_str()) == 0;
  if (!written) {
    const int cause = errno;
    ::close(fd);
    ::unlink(staging.c_str());
    return Error{"cannot write the token file " + path.string() + ": " + std::strerror(cause)};
  }
  return std::unique_ptr<ControlTokenFile>(new ControlTokenFile(std::move(path), fd, stale));
}

ControlTokenFile::~ControlTokenFile() {
  ::unlink(path_.c_str());
  ::close(held_fd_);
}

}  // namespace troupe::actors
