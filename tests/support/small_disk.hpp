#pragma once
// A tmpfs of a given size mounted on a fresh temp folder, for tests of a full disk: unmounted and
// removed when the object goes away, the test failing or not. Mounting needs root (CAP_SYS_ADMIN);
// where it is refused the constructor throws the reason, which fails the test: it never skips.

#include <cstddef>
#include <filesystem>

#include "support/temp_dir.hpp"

namespace troupe::test {

class SmallDisk {
 public:
  explicit SmallDisk(std::size_t bytes);
  ~SmallDisk();
  SmallDisk(const SmallDisk&) = delete;
  SmallDisk& operator=(const SmallDisk&) = delete;

  const std::filesystem::path& path() const { return folder_.path(); }

 private:
  TempDir folder_;  // the mount point; removed after the destructor has unmounted it
};

}  // namespace troupe::test
