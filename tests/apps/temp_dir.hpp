#pragma once
// A fresh, empty directory under the system temp directory, removed with everything in it when
// the object goes away.

#include <filesystem>
#include <string>

namespace troupe::test {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes text to a file called name inside the directory and returns its path.
  std::string write(const std::string& name, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

}  // namespace troupe::test
