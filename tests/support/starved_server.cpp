#include "support/starved_server.hpp"

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <stdexcept>
#include <vector>

namespace troupe::test {
namespace {

// Reads one int from the pipe; -1 when the other end is gone.
int read_int(int fd) {
  int value = -1;
  return ::read(fd, &value, sizeof value) == static_cast<ssize_t>(sizeof value) ? value : -1;
}

void write_int(int fd, int value) { (void)!::write(fd, &value, sizeof value); }

[[noreturn]] void run_child(int limit, const std::function<int()>& serve, int commands, int answers) {
  const rlimit lowered{static_cast<rlim_t>(limit), static_cast<rlim_t>(limit)};
  if (::setrlimit(RLIMIT_NOFILE, &lowered) != 0) ::_exit(3);
  write_int(answers, serve());
  std::vector<int> taken;
  for (int fd; (fd = ::dup(STDERR_FILENO)) >= 0;) taken.push_back(fd);
  write_int(answers, static_cast<int>(taken.size()));
  if (read_int(commands) < 0) ::_exit(0);
  for (int fd : taken) ::close(fd);
  write_int(answers, 0);
  for (;;) ::pause();
}

}  // namespace

StarvedServer::StarvedServer(int limit, std::function<int()> serve) {
  int down[2], up[2];
  if (::pipe(down) != 0 || ::pipe(up) != 0) throw std::runtime_error("pipe failed");
  pid_ = ::fork();
  if (pid_ < 0) throw std::runtime_error("fork failed");
  if (pid_ == 0) {
    ::close(down[1]);
    ::close(up[0]);
    run_child(limit, serve, down[0], up[1]);
  }
  ::close(down[0]);
  ::close(up[1]);
  to_child_ = down[1];
  from_child_ = up[0];
  port_ = read_int(from_child_);
  if (port_ <= 0 || read_int(from_child_) < 0) throw std::runtime_error("the starved server did not start");
}

void StarvedServer::release() {
  write_int(to_child_, 1);
  (void)read_int(from_child_);
}

StarvedServer::~StarvedServer() {
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  ::close(to_child_);
  ::close(from_child_);
}

}  // namespace troupe::test
