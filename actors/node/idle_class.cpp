#include "actors/node/idle_class.hpp"

#include <dirent.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace troupe::actors {

namespace {

// Every thread listed in `tasks_folder` (a /proc/<pid>/task) into `policy`.
Status set_scheduling_class(const std::string& tasks_folder, int policy, const char* shown) {
  DIR* tasks = opendir(tasks_folder.c_str());
  if (tasks == nullptr) {
    if (errno == ENOENT) return {};  // the process is gone, every thread with it
    return Error{"cannot list the threads in " + tasks_folder + ": " + std::strerror(errno)};
  }
  const sched_param parameters{};
  Status status;
  while (const dirent* task = readdir(tasks)) {
    if (task->d_name[0] == '.') continue;
    if (sched_setscheduler(std::stoi(task->d_name), policy, &parameters) != 0 && errno != ESRCH) {
      status = Error{std::string("the kernel refused the ") + shown + " scheduling class: " + std::strerror(errno)};
      break;
    }
  }
  closedir(tasks);
  return status;
}

}  // namespace

Status enter_idle_scheduling_class() { return set_scheduling_class("/proc/self/task", SCHED_IDLE, "idle"); }

Status leave_idle_scheduling_class(int pid) {
  return set_scheduling_class("/proc/" + std::to_string(pid) + "/task", SCHED_OTHER, "normal");
}

}  // namespace troupe::actors
