#pragma once
// How a child process ended, as waitpid() tells it, in words a user can act on.

#include <string>

namespace troupe::launch {

struct ExitStatus {
  int code = 0;    // the exit code when the process exited; -1 when its status was lost
  int signal = 0;  // the signal that killed it, else 0

  bool success() const { return signal == 0 && code == 0; }
  // "exited with code 3", "was killed by signal 9 (SIGKILL)"
  std::string describe() const;
};

// The ExitStatus of a waitpid() status word.
ExitStatus exit_status_from_wait(int wait_status);

}  // namespace troupe::launch
