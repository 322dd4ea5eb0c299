#pragma once
// A whole file mapped read-only. A loader reads each shard once this way: the page cache holds
// the bytes, hashing and copying read them in place, and nothing is copied up front.

#include <cstddef>
#include <filesystem>
#include <span>

#include "compute/expected.hpp"

namespace troupe::checkpoint {

class MappedFile {
 public:
  static Expected<MappedFile> open(const std::filesystem::path& path);
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  ~MappedFile();

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  const std::filesystem::path& path() const { return path_; }

 private:
  MappedFile(std::filesystem::path path, const std::byte* data, std::size_t size)
      : path_(std::move(path)), data_(data), size_(size) {}
  void unmap();

  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace troupe::checkpoint
