// A CPU quota holds a process to its share of a core: a child that joins a group of half a core and
// spins for 0.3 s of CPU time takes at least about twice that in wall time, whatever the load
// (the load can only slow it more). Where no writable cgroup with a CPU controller exists it says
// so and is skipped.

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <ctime>

#include "apps/bench/cpu_quota.hpp"

using namespace troupe::apps;

namespace {

double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

}  // namespace

TEST_CASE("a process in a CPU quota of half a core gets at most about half a core", "[bench][quota]") {
  auto quota = CpuQuota::create("test", 0.5);
  if (!quota) {
    WARN("SKIPPED (needs a writable cgroup v2, or v1 cpu hierarchy): " << quota.error().message);
    return;
  }
  INFO(quota->describe());
  const auto start = std::chrono::steady_clock::now();
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    if (!quota->join(::getpid())) ::_exit(3);
    volatile double sink = 0;
    while (cpu_seconds() < 0.3) sink = sink + 1;
    ::_exit(0);
  }
  int status = 0;
  rusage usage{};
  REQUIRE(::wait4(child, &status, 0, &usage) == child);
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  const double cpu = static_cast<double>(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
                     static_cast<double>(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) * 1e-6;
  CHECK(cpu >= 0.3);
  CHECK(cpu / wall < 0.6);  // a whole core would give about 1
}
