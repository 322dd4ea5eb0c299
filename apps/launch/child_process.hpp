#pragma once
// One child of the launcher, seen through file descriptors an Asio loop can wait on: its stdout
// and stderr pipes, and a pidfd that becomes readable when it exits (Linux 5.3 or newer). No
// SIGCHLD handler is installed, so other code in the process may run and reap its own children.
//
// The child is started with posix_spawn in a process group of its own: stdin is /dev/null, every
// descriptor above stderr is closed, signal mask and dispositions are reset. Signals go to the
// whole group, so a node's helpers (the sh of a template, a script's commands) stop with it, and
// a Ctrl-C at the terminal reaches only the launcher, which then stops the children in order.

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>

#include "apps/launch/exit_status.hpp"
#include "apps/launch/process_spec.hpp"
#include "compute/expected.hpp"

namespace troupe::launch {

class ChildProcess {
 public:
  // Starts argv (argv[0] searched in PATH) with env set on top of this process's environment.
  static Expected<std::unique_ptr<ChildProcess>> spawn(boost::asio::io_context& io,
                                                       const std::vector<std::string>& argv, const Environment& env);
  // A child not reaped by then is killed (its group, SIGKILL) and reaped.
  ~ChildProcess();
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  // Sends signo to the child's process group; nothing once the child is reaped.
  void signal(int signo);
  // The exit status once the child has exited (never blocks), else nothing.
  std::optional<ExitStatus> reap();

  boost::asio::posix::stream_descriptor& stdout_pipe() { return stdout_; }
  boost::asio::posix::stream_descriptor& stderr_pipe() { return stderr_; }
  // Readable once the child has exited.
  boost::asio::posix::stream_descriptor& exit_watch() { return pidfd_; }
  pid_t pid() const { return pid_; }

 private:
  ChildProcess(boost::asio::io_context& io, pid_t pid, int pidfd, int out, int err);

  pid_t pid_;
  bool reaped_ = false;
  boost::asio::posix::stream_descriptor pidfd_;
  boost::asio::posix::stream_descriptor stdout_;
  boost::asio::posix::stream_descriptor stderr_;
};

}  // namespace troupe::launch
