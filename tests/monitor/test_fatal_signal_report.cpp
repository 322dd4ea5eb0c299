// The report of a fault's signal: a forked process that faults says which signal, where and in
// which pid, with a backtrace, and dies of the signal.

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "monitor/fatal_signal_report.hpp"

using troupe::monitor::report_fatal_signals;
using troupe::monitor::reports_fatal_signal;

TEST_CASE("a process that faults reports the signal, its address, pid and a backtrace on stderr, then dies of it",
          "[monitor]") {
  for (const int signal : {SIGSEGV, SIGFPE}) {
    INFO("signal " << signal);
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
      ::dup2(pipe_fds[1], STDERR_FILENO);
      report_fatal_signals();
      if (!reports_fatal_signal(SIGSEGV) || !reports_fatal_signal(SIGBUS) || !reports_fatal_signal(SIGILL) ||
          !reports_fatal_signal(SIGFPE))
        ::_exit(3);
      if (signal == SIGSEGV) {
        volatile int* nowhere = nullptr;
        *nowhere = 1;  // a real fault, at address 0
      }
      ::raise(signal);
      ::_exit(4);  // not reached: the signal ends the process
    }
    ::close(pipe_fds[1]);
    std::string said;
    char buffer[4096];
    for (ssize_t n; (n = ::read(pipe_fds[0], buffer, sizeof buffer)) > 0;) said.append(buffer, static_cast<size_t>(n));
    ::close(pipe_fds[0]);
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    INFO(said);
    REQUIRE(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == signal);
    // A fault names its address; a signal raised names its sender (here the process itself).
    const std::string named = signal == SIGSEGV ? "SIGSEGV (invalid memory access) at address 0x0 in pid "
                                                : "SIGFPE (arithmetic fault) sent by pid " + std::to_string(child);
    CHECK_THAT(said, Catch::StartsWith("troupe: fatal signal " + named));
    CHECK_THAT(said, Catch::Contains(" in pid " + std::to_string(child) + ", thread "));
    // The backtrace: one line a frame, this test binary's among them.
    CHECK_THAT(said, Catch::Contains("; backtrace:\n") && Catch::Contains("test_monitor("));
  }
}
