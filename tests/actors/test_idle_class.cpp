// A process entering the idle scheduling class: every thread it has and every thread it starts
// after; its threads moved back to the normal class from outside, as killing a node process does;
// and that kill.
// Checked in forked children, so the test process keeps its class.

#include <catch2/catch.hpp>

#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "actors/idle_class.hpp"

using namespace troupe::actors;

namespace {

pid_t this_thread_id() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// Exit codes of the child: 0 when every thread checked is idle-class, else which check failed.
int child_checks() {
  if (sched_getscheduler(0) != SCHED_OTHER) return 10;
  std::atomic<pid_t> earlier_id{0};
  std::atomic<bool> done{false};
  std::thread earlier([&] {
    earlier_id = this_thread_id();
    while (!done) std::this_thread::yield();
  });
  while (earlier_id == 0) std::this_thread::yield();
  const troupe::Status entered = enter_idle_scheduling_class();
  if (!entered.ok()) return 11;
  int code = 0;
  if (sched_getscheduler(0) != SCHED_IDLE) code = 12;
  if (sched_getscheduler(earlier_id) != SCHED_IDLE) code = 13;
  int later_policy = -1;
  std::thread later([&] { later_policy = sched_getscheduler(0); });
  later.join();
  if (later_policy != SCHED_IDLE) code = 14;
  done = true;
  earlier.join();
  return code;
}

}  // namespace

TEST_CASE("entering the idle scheduling class moves the process's threads, earlier and later ones", "[node]") {
  REQUIRE(sched_getscheduler(0) == SCHED_OTHER);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(child_checks());
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  REQUIRE(WIFEXITED(status));
  // 10: the child did not start in the normal class; 11: the call failed; 12, 13, 14: the calling
  // thread, a thread started before, a thread started after was not idle-class.
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(sched_getscheduler(0) == SCHED_OTHER);
}

TEST_CASE("a process's threads leave the idle scheduling class from outside, and a process gone leaves it at once",
          "[node]") {
  // The child: two threads in the idle class, then waiting for the parent's verdict on a pipe.
  int to_child[2], from_child[2];
  REQUIRE(pipe(to_child) == 0);
  REQUIRE(pipe(from_child) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    std::atomic<bool> done{false};
    std::thread second([&] {
      while (!done) std::this_thread::yield();
    });
    const char entered = enter_idle_scheduling_class().ok() ? 'y' : 'n';
    if (write(from_child[1], &entered, 1) != 1) _exit(20);
    char go = 0;
    if (read(to_child[0], &go, 1) != 1) _exit(21);
    done = true;
    second.join();
    _exit(0);
  }
  char entered = 0;
  REQUIRE(read(from_child[0], &entered, 1) == 1);
  REQUIRE(entered == 'y');
  const auto thread_policies = [&] {
    std::vector<int> policies;
    for (const auto& task : std::filesystem::directory_iterator("/proc/" + std::to_string(child) + "/task"))
      policies.push_back(sched_getscheduler(std::stoi(task.path().filename().string())));
    return policies;
  };
  CHECK(thread_policies() == std::vector<int>{SCHED_IDLE, SCHED_IDLE});
  CHECK(leave_idle_scheduling_class(child));
  CHECK(thread_policies() == std::vector<int>{SCHED_OTHER, SCHED_OTHER});
  const char go = 'g';
  REQUIRE(write(to_child[1], &go, 1) == 1);
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  for (int fd : {to_child[0], to_child[1], from_child[0], from_child[1]}) close(fd);
  // Reaped: no /proc/<pid>/task to list, nothing to move.
  CHECK(leave_idle_scheduling_class(child));
}

TEST_CASE("killing a node process: SIGKILL to an idle-class process ends it, and a process gone is one clear failure",
          "[node]") {
  int from_child[2];
  REQUIRE(pipe(from_child) == 0);
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    const char entered = enter_idle_scheduling_class().ok() ? 'y' : 'n';
    if (write(from_child[1], &entered, 1) != 1) _exit(20);
    pause();
    _exit(0);
  }
  char entered = 0;
  REQUIRE(read(from_child[0], &entered, 1) == 1);
  REQUIRE(entered == 'y');
  CHECK(kill_node_process(child));
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK((WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL));
  errno = 0;
  CHECK_FALSE(kill_node_process(child));
  CHECK(errno == ESRCH);
  for (int fd : {from_child[0], from_child[1]}) close(fd);
}
