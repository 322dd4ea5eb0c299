#pragma once
// One job per checkpoint folder: the job that writes checkpoints into DIR holds an exclusive flock
// on DIR/lock for as long as it runs, and the file names it (docs/formats/checkpoint.md, "The
// lock"). The kernel drops a flock when its holder exits, however it ends (SIGKILL included), so
// the flock and not the file's presence says whether the holder lives: a file nobody holds is a
// dead job's leftover, taken over by the next job. Readers (resume, export) never take it.

#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "compute/expected.hpp"

namespace troupe::checkpoint {

// Who holds (or held) a folder, as its lock file says.
struct LockHolder {
  long pid = 0;
  std::string host;
  std::string started;  // UTC, "2026-11-25T22:10:03Z"
  std::string command;  // the holder's command line, arguments joined by spaces
};

// "pid 123 on host h, started 2026-11-25T22:10:03Z: troupe train ..."
std::string describe(const LockHolder& holder);

std::filesystem::path lock_path(const std::filesystem::path& dir);  // DIR/lock

class FolderLock {
 public:
  // Creates DIR if needed and takes DIR/lock for this process, writing its pid, host, start time
  // and command line into it. When another live process holds it, the error names that holder.
  static Expected<std::unique_ptr<FolderLock>> take(const std::filesystem::path& dir);
  // Removes the lock file, still holding it, so nobody takes over a file about to go.
  ~FolderLock();
  FolderLock(const FolderLock&) = delete;
  FolderLock& operator=(const FolderLock&) = delete;

  // The dead holder whose leftover lock file this one took over, if there was one.
  const std::optional<LockHolder>& taken_over() const { return taken_over_; }

 private:
  FolderLock(std::filesystem::path path, int held_fd, std::optional<LockHolder> taken_over)
      : path_(std::move(path)), held_fd_(held_fd), taken_over_(std::move(taken_over)) {}

  std::filesystem::path path_;
  int held_fd_;  // open, with the flock
  std::optional<LockHolder> taken_over_;
};

}  // namespace troupe::checkpoint
