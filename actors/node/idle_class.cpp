#include "actors/node/idle_class.hpp"

#include <dirent.h>
#include <sched.h>

#include <cerrno>
#include <cstring>
#include <string>

namespace troupe::actors {

Status enter_idle_scheduling_class() {
  DIR* tasks = opendir("/proc/self/task");
  if (tasks == nullptr)
    return Error{std::string("cannot list this process's threads in /proc/self/task: ") + std::strerror(errno)};
  const sched_param parameters{};
  Status status;
  while (const dirent* task = readdir(tasks)) {
    if (task->d_name[0] == '.') continue;
    if (sched_setscheduler(std::stoi(task->d_name), SCHED_IDLE, &parameters) != 0 && errno != ESRCH) {
      status = Error{std::string("the kernel refused the idle scheduling class: ") + std::strerror(errno)};
      break;
    }
  }
  closedir(tasks);
  return status;
}

}  // namespace troupe::actors
