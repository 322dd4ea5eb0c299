#include "monitor/fatal_signal_report.hpp"

#include <execinfo.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace troupe::monitor {
namespace {

constexpr int reported_signals[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE};

// Async-signal-safe writes: write(2) of fixed text and of numbers formatted on the stack.
void say(const char* text) { (void)!::write(STDERR_FILENO, text, std::strlen(text)); }

void say_number(std::uint64_t value, unsigned base) {
  char digits[24];
  int at = sizeof digits;
  digits[--at] = '\0';
  do {
    digits[--at] = "0123456789abcdef"[value % base];
    value /= base;
  } while (value > 0 && at > 0);
  say(digits + at);
}

const char* signal_name(int signal) {
  switch (signal) {
    case SIGSEGV: return "SIGSEGV (invalid memory access)";
    case SIGBUS: return "SIGBUS (bus error)";
    case SIGILL: return "SIGILL (illegal instruction)";
    case SIGFPE: return "SIGFPE (arithmetic fault)";
    default: return "a fault signal";
  }
}

void on_fatal_signal(int signal, siginfo_t* info, void*) {
  say("troupe: fatal signal ");
  say(signal_name(signal));
  if (info->si_code <= 0) {  // kill(), raise(), sigqueue(): no fault, a sender
    say(" sent by pid ");
    say_number(static_cast<std::uint64_t>(info->si_pid), 10);
  } else {
    say(" at address 0x");
    say_number(reinterpret_cast<std::uintptr_t>(info->si_addr), 16);
  }
  say(" in pid ");
  say_number(static_cast<std::uint64_t>(::getpid()), 10);
  say(", thread ");
  say_number(static_cast<std::uint64_t>(::syscall(SYS_gettid)), 10);
  say("; backtrace:\n");
  void* frames[64];
  const int count = ::backtrace(frames, 64);
  ::backtrace_symbols_fd(frames, count, STDERR_FILENO);
  // The default action is back (SA_RESETHAND), and the signal is not blocked here (SA_NODEFER):
  // the process dies of it now, as the kernel would have ended it.
  ::raise(signal);
}

}  // namespace

void report_fatal_signals() {
  void* warm[1];
  (void)::backtrace(warm, 1);
  struct sigaction action {};
  action.sa_sigaction = on_fatal_signal;
  action.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
  sigemptyset(&action.sa_mask);
  for (int signal : reported_signals) ::sigaction(signal, &action, nullptr);
}

bool reports_fatal_signal(int signal) {
  struct sigaction current {};
  return ::sigaction(signal, nullptr, &current) == 0 && (current.sa_flags & SA_SIGINFO) != 0 &&
         current.sa_sigaction == on_fatal_signal;
}

}  // namespace troupe::monitor
