#include "actors/idle_class.hpp"

#include <dirent.h>
#include <sched.h>
#include <signal.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace troupe::actors {

namespace {

// What moving a process's threads to another scheduling class met: whether `/proc/<pid>/task` could
// be listed, and the errno of the listing or of the first thread the kernel refused (0: none).
struct ClassChange {
  bool listed = true;
  int error = 0;
};

ClassChange set_scheduling_class(const std::string& tasks_folder, int policy) {
  DIR* tasks = opendir(tasks_folder.c_str());
  if (tasks == nullptr) return {false, errno};
  const sched_param parameters{};
  ClassChange change;
  while (const dirent* task = readdir(tasks)) {
    if (task->d_name[0] == '.') continue;
    // A thread that exited since the listing (ESRCH) has no class to change.
    if (sched_setscheduler(std::stoi(task->d_name), policy, &parameters) != 0 && errno != ESRCH) {
      change.error = errno;
      break;
    }
  }
  closedir(tasks);
  return change;
}

}  // namespace

Status enter_idle_scheduling_class() {
  const ClassChange change = set_scheduling_class("/proc/self/task", SCHED_IDLE);
  if (!change.listed)
    return Error{std::string("cannot list this process's threads in /proc/self/task: ") + std::strerror(change.error)};
  if (change.error != 0)
    return Error{std::string("the kernel refused the idle scheduling class: ") + std::strerror(change.error)};
  return {};
}

bool leave_idle_scheduling_class(int pid) {
  const ClassChange change = set_scheduling_class("/proc/" + std::to_string(pid) + "/task", SCHED_OTHER);
  // A process already reaped has no threads left to wait for.
  return change.listed ? change.error == 0 : change.error == ENOENT;
}

bool kill_node_process(int pid) {
  if (::kill(pid, SIGKILL) != 0) return false;
  leave_idle_scheduling_class(pid);
  return true;
}

}  // namespace troupe::actors
