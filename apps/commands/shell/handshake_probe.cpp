#include "apps/commands/shell/handshake_probe.hpp"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <memory>

namespace troupe::apps::shell {
namespace {

using Clock = std::chrono::steady_clock;

struct ClosedOnExit {
  int fd;
  ~ClosedOnExit() { ::close(fd); }
};

// Waits until `fd` is ready for `events` or the deadline passes; false on the deadline.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) return false;
    pollfd watched{fd, events, 0};
    const int ready = ::poll(&watched, 1, static_cast<int>(left));
    if (ready > 0) return true;
    if (ready < 0 && errno != EINTR) return true;  // the read or connect that follows says what is wrong
  }
}

}  // namespace

Status await_handshake(const std::string& host, int port, std::chrono::seconds timeout) {
  const std::string address = host + ":" + std::to_string(port);
  const auto silent = [&](const std::string& stage) {
    return Error{"the job at " + address + " did not answer within " + std::to_string(timeout.count()) + " s (" + stage + ")"};
  };
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int failed = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); failed != 0)
    return Error{"cannot reach the job at " + address + ": " + ::gai_strerror(failed)};
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> owned(found, &::freeaddrinfo);
  const int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return Error{"cannot reach the job at " + address + ": " + std::strerror(errno)};
  const ClosedOnExit closing{fd};
  const auto deadline = Clock::now() + timeout;
  if (::connect(fd, found->ai_addr, found->ai_addrlen) != 0) {
    if (errno != EINPROGRESS) return Error{"cannot reach the job at " + address + ": " + std::strerror(errno)};
    if (!wait_for(fd, POLLOUT, deadline)) return silent("no TCP connection");
    int error = 0;
    socklen_t length = sizeof error;
    ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) return Error{"cannot reach the job at " + address + ": " + std::strerror(error)};
  }
  if (!wait_for(fd, POLLIN, deadline)) return silent("connected, but no handshake came");
  char first = 0;
  const ssize_t got = ::recv(fd, &first, 1, 0);
  if (got == 1) return Status::success();
  return Error{"cannot reach the job at " + address + ": " +
               (got == 0 ? std::string("it closed the connection before its handshake") : std::strerror(errno))};
}

}  // namespace troupe::apps::shell
