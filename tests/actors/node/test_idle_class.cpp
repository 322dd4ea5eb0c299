// A process entering the idle scheduling class: every thread it has and every thread it starts
// after. Checked in a forked child, so the test process keeps its class.

#include <catch2/catch.hpp>

#include <sched.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "actors/node/idle_class.hpp"

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
