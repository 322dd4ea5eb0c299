#pragma once
// The exit codes of `troupe`, named once, and the one way a command reports an error: a single
// line "troupe: error: <message>" on stderr, then the exit code. docs/configuration.md (Exit
// codes) is this table for users.
//
//   code  name           meaning
//   0     success        the command did what it was asked
//   1     failure        it failed while running (a node failed, a file could not be written, ...)
//   2     bad_input      the input was wrong (option, config file or value, environment variable,
//                        host file), found before any work starts
//   3     start_failed   troupe launch: a node process could not start (pre-flight failed or timed
//                        out, its program could not be run)
//   129   hung_up        troupe launch: SIGHUP (128 + 1), the launcher's terminal went away
//   130   interrupted    troupe launch: SIGINT (128 + 2), Ctrl-C
//   143   terminated     troupe launch: SIGTERM (128 + 15)
//
// The signal codes follow the shell's 128 + signal number; apps/launch/node_launcher.cpp turns
// the launcher's JobEnd into them. Header-only, so troupe_launch (which links only troupe_compute)
// uses the same table. actors/ returns exit codes as plain ints from this table (it may not include
// apps/); exit_code_of() takes them back.

#include <csignal>
#include <cstdio>
#include <string>
#include <string_view>

namespace troupe::apps {

enum class ExitCode : int {
  success = 0,
  failure = 1,
  bad_input = 2,
  start_failed = 3,
  hung_up = 129,
  interrupted = 130,
  terminated = 143,
};

// The shell's exit code of a process ended by `signal`: 128 + its number.
constexpr int signal_exit_code(int signal) { return 128 + signal; }

static_assert(signal_exit_code(SIGHUP) == 129 && signal_exit_code(SIGINT) == 130 && signal_exit_code(SIGTERM) == 143,
              "the signal exit codes assume Linux's signal numbers");

constexpr int to_int(ExitCode code) { return static_cast<int>(code); }

// An exit code the runtime (actors/) returned as an int of this table.
constexpr ExitCode exit_code_of(int code) { return static_cast<ExitCode>(code); }

// Writes "troupe: error: <message>" to stderr as one line (a line break in the message becomes a
// space) and returns `code` as the process's exit code:  return error_exit(ExitCode::bad_input, why);
inline int error_exit(ExitCode code, std::string_view message) {
  std::string line(message);
  for (char& c : line)
    if (c == '\n' || c == '\r') c = ' ';
  line = "troupe: error: " + line + "\n";
  std::fputs(line.c_str(), stderr);
  return to_int(code);
}

}  // namespace troupe::apps
