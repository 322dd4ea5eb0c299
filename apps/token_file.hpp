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

namespace troupe::apps {

std::filesystem::path default_token_file(int control_port);

// The token in `path` (its first line); an Error naming the path when it cannot be read or is empty.
Expected<std::string> read_token_file(const std::filesystem::path& path);

class TokenFile {
 public:
  // Writes `token` to `path` readable by this user alone, making its folder (0700) if needed.
  static Expected<std::unique_ptr<TokenFile>> write(std::filesystem::path path, const std::string& token);
  ~TokenFile();
  TokenFile(const TokenFile&) = delete;
  TokenFile& operator=(const TokenFile&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  explicit TokenFile(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

}  // namespace troupe::apps
