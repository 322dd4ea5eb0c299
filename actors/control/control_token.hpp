#pragma once
// The job's token on disk, for `troupe shell`: the job process writes it where only its user can
// read it (mode 0600 in a 0700 folder) and removes it when the job ends; the shell reads it from
// there unless given --token-file or TROUPE_TOKEN.
//
//   $XDG_RUNTIME_DIR/troupe/job-PORT.token   (or ~/.troupe/job-PORT.token without XDG_RUNTIME_DIR)
//
// PORT is the job's control port: the shell knows it from HOST:PORT, so it finds the file alone.
// The job holds an exclusive flock on its file for as long as it runs, so a file nobody holds is
// a killed job's leftover: the next job to write its own removes those from the folder.

#include <filesystem>
#include <memory>
#include <string>

#include "compute/expected.hpp"

namespace troupe::actors {

std::filesystem::path default_control_token_path(int control_port);

// The token in `path` (its first line); an Error naming the path when it cannot be read or is empty.
Expected<std::string> read_control_token(const std::filesystem::path& path);

class ControlTokenFile {
 public:
  // Writes `token` to `path` readable by this user alone, making its folder (0700) if needed, and
  // removes the folder's token files that no live job holds.
  static Expected<std::unique_ptr<ControlTokenFile>> write(std::filesystem::path path, const std::string& token);
  ~ControlTokenFile();
  ControlTokenFile(const ControlTokenFile&) = delete;
  ControlTokenFile& operator=(const ControlTokenFile&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Leftover token files of jobs that were killed, removed when this one was written.
  int stale_removed() const { return stale_removed_; }

 private:
  ControlTokenFile(std::filesystem::path path, int held_fd, int stale_removed)
      : path_(std::move(path)), held_fd_(held_fd), stale_removed_(stale_removed) {}
  std::filesystem::path path_;
  int held_fd_;  // open, with the flock that marks the file as this live job's
  int stale_removed_;
};

// Removes every job-PORT.token in `folder` that no process holds a flock on; returns how many.
int remove_unheld_control_tokens(const std::filesystem::path& folder);

}  // namespace troupe::actors
