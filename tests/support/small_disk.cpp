#include "support/small_disk.hpp"

#include <sys/mount.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>

namespace troupe::test {

SmallDisk::SmallDisk(std::size_t bytes) {
  std::string pattern = (std::filesystem::temp_directory_path() / "troupe-small-disk-XXXXXX").string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot make a temp folder: " + std::string(std::strerror(errno)));
  path_ = pattern;
  const std::string options = "size=" + std::to_string(bytes);
  if (::mount("tmpfs", path_.c_str(), "tmpfs", 0, options.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::error_code ignored;
    std::filesystem::remove(path_, ignored);
    throw std::runtime_error("cannot mount a " + std::to_string(bytes) + "-byte tmpfs on " + path_.string() + " (" +
                             why + "): this test needs root to fake a full disk; it fails rather than skip");
  }
}

SmallDisk::~SmallDisk() {
  // Lazily: a process the test started may still hold a file there.
  ::umount2(path_.c_str(), MNT_DETACH);
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

}  // namespace troupe::test
