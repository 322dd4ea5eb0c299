#pragma once
// The launcher template starts a node process on another host: a shell command line such as
// `ssh {host} {command}` or `srun --nodes=1 --ntasks=1 -w {host} sh -c {command}`. {host} becomes
// the host and {command} the node's command as one shell word: `env NAME=value ... program args`,
// every word quoted as needed, so the remote shell sees exactly the argv and environment given.
// The launcher runs the expanded line with /bin/sh -c, so a template may use quotes, variables
// and redirections.

#include <string>
#include <string_view>
#include <vector>

#include "apps/launch/process_spec.hpp"
#include "compute/expected.hpp"

namespace troupe::launch {

class LaunchTemplate {
 public:
  // Checks that text holds both {host} and {command}.
  static Expected<LaunchTemplate> parse(std::string text);
  // `ssh -o BatchMode=yes {host} {command}`: BatchMode fails at once where ssh would ask for a
  // password.
  static LaunchTemplate ssh();

  // The shell line that runs command on host: every {host} and {command} replaced by the value
  // as one shell word.
  std::string expand(std::string_view host, std::string_view command) const;
  const std::string& text() const { return text_; }

 private:
  explicit LaunchTemplate(std::string text) : text_(std::move(text)) {}
  std::string text_;
};

// word as one POSIX shell word: unchanged when it holds only [A-Za-z0-9_@%+=:,./-], else in single
// quotes with each ' written '\''.
std::string shell_quote(std::string_view word);

// `env NAME=value ... argv...` with every word quoted as needed: a node's command for a remote
// shell.
std::string remote_command_line(const Environment& env, const std::vector<std::string>& argv);

}  // namespace troupe::launch
