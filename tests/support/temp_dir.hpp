#pragma once
// A fresh, empty directory under the system temp directory, removed with everything in it when
// the object goes away.

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace troupe::test {

class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // The path of name inside the directory; nothing is created.
  std::string file(const std::string& name) const;
  // Writes bytes to a file called name inside the directory, creating the folders name passes
  // through, and returns its path. Text is written as it is: no newline translation, NULs kept.
  std::string write(const std::string& name, const std::string& text) const;
  std::string write(const std::string& name, const std::vector<std::uint8_t>& bytes) const;

 private:
  std::filesystem::path path_;
};

}  // namespace troupe::test
