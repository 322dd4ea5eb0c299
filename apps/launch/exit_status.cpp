// Exit statuses in words; signal names from glibc's sigabbrev_np.

#include "apps/launch/exit_status.hpp"

#include <string.h>
#include <sys/wait.h>

namespace troupe::launch {

std::string ExitStatus::describe() const {
  if (signal != 0) {
    const char* name = sigabbrev_np(signal);
    return "was killed by signal " + std::to_string(signal) + (name ? " (SIG" + std::string(name) + ")" : "");
  }
  if (code < 0) return "ended, but its exit status was lost";
  return "exited with code " + std::to_string(code);
}

ExitStatus exit_status_from_wait(int wait_status) {
  if (WIFSIGNALED(wait_status)) return {-1, WTERMSIG(wait_status)};
  return {WEXITSTATUS(wait_status), 0};
}

}  // namespace troupe::launch
