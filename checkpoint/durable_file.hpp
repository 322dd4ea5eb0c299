#pragma once
// File writes a crash cannot tear. A checkpoint is only as good as its weakest fsync: data must
// reach the disk before the rename that publishes it, and a rename only lasts once the folder
// holding it is synced too. Errors name the file and the system's reason (e.g. "No space left
// on device").

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>

#include "compute/expected.hpp"

namespace troupe::checkpoint {

// A new file written front to back; finish() syncs and closes it. A writer dropped without
// finish() (an earlier error) closes the file and leaves it for the caller to remove.
class DurableWriter {
 public:
  static Expected<DurableWriter> create(const std::filesystem::path& path);
  DurableWriter(DurableWriter&& other) noexcept;
  DurableWriter& operator=(DurableWriter&&) = delete;
  ~DurableWriter();

  Status write(const void* data, std::size_t size);
  Status finish();  // fsync, then close

 private:
  DurableWriter(std::filesystem::path path, int fd) : path_(std::move(path)), fd_(fd) {}
  Error error(const std::string& action, int err) const;

  std::filesystem::path path_;
  int fd_;
};

// Flushes a file's or a folder's entries to disk (a folder's sync makes renames in it durable).
Status fsync_path(const std::filesystem::path& path);

// Writes `path.tmp`, syncs it, renames it over `path` and syncs the folder: readers see the old
// content or the new, never a mix.
Status replace_file(const std::filesystem::path& path, std::string_view content);

}  // namespace troupe::checkpoint
