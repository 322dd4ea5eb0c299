#include "support/small_disk.hpp"

#include <sys/mount.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string>

namespace troupe::test {

SmallDisk::SmallDisk(std::size_t bytes) {
  const std::string options = "size=" + std::to_string(bytes);
  if (::mount("tmpfs", path().c_str(), "tmpfs", 0, options.c_str()) != 0)
    throw std::runtime_error("cannot mount a " + std::to_string(bytes) + "-byte tmpfs on " + path().string() + " (" +
                             std::strerror(errno) + "): this test needs root to fake a full disk; it fails rather than skip");
}

SmallDisk::~SmallDisk() {
  // Lazily: a process the test started may still hold a file there.
  ::umount2(path().c_str(), MNT_DETACH);
}

}  // namespace troupe::test
