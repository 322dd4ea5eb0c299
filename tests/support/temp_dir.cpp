#include "support/temp_dir.hpp"

#include <stdlib.h>

#include <fstream>
#include <stdexcept>

namespace troupe::test {
namespace {

std::string write_file(const std::filesystem::path& file, const char* data, std::size_t size) {
  std::filesystem::create_directories(file.parent_path());
  std::ofstream(file, std::ios::binary).write(data, static_cast<std::streamsize>(size));
  return file.string();
}

}  // namespace

TempDir::TempDir() {
  std::string pattern = (std::filesystem::temp_directory_path() / "troupe-test-XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed for " + pattern);
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ignored;
  std::filesystem::remove_all(path_, ignored);
}

std::string TempDir::file(const std::string& name) const { return (path_ / name).string(); }

std::string TempDir::write(const std::string& name, const std::string& text) const {
  return write_file(path_ / name, text.data(), text.size());
}

std::string TempDir::write(const std::string& name, const std::vector<std::uint8_t>& bytes) const {
  return write_file(path_ / name, reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

}  // namespace troupe::test
