#pragma once
// The job's token on disk, for `troupe shell`: the job process writes it where only its user can
// read it (mode 0600 in a 0700 folder) and removes it when the job ends; the shell reads it from
// there unless given --token-file or TROUPE_TOKEN.
//
//   $XDG_RUNTIME_DIR/troupe/job-PORT.token   (or ~/.troupe/job-PORT.token without XDG_RUNTIME_DIR)
//
// PORT is the job's control port: the shell knows it from HOST:PORT, so it finds the file alone.

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
  // Writes `token` to `path` readable by this user alone, making its folder (0700) if needed.
  static Expected<std::unique_ptr<ControlTokenFile>> write(std::filesystem::path path, const std::string& token);
  ~ControlTokenFile();
  ControlTokenFile(const ControlTokenFile&) = delete;
  ControlTokenFile& operator=(const ControlTokenFile&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  explicit ControlTokenFile(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

}  // namespace troupe::actors
