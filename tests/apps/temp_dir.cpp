#include "temp_dir.hpp"

#include <stdlib.h>

#include <fstream>
#include <stdexcept>

namespace troupe::test {

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "troupe-test-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::write(const std::string& name, const std::string& text) const {
  const auto file = path_ / name;
  std::ofstream(file, std::ios::binary) << text;
  return file.string();
}

}  // namespace troupe::test
