#pragma once
// A server in a child process that runs out of file descriptors, for the tests of what a port does
// at its process's open-file limit (the test runner's own limit is left alone). The child lowers
// its limit to `limit`, starts the server, then takes every descriptor left, until `release()`.

#include <sys/types.h>

#include <functional>

namespace troupe::test {

class StarvedServer {
 public:
  // `serve` runs in the child: it starts the server, keeps it alive, and returns its port.
  StarvedServer(int limit, std::function<int()> serve);
  ~StarvedServer();  // kills the child
  StarvedServer(const StarvedServer&) = delete;
  StarvedServer& operator=(const StarvedServer&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return pid_; }
  // The child closes the descriptors it took; returns once it has.
  void release();

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  int to_child_ = -1, from_child_ = -1;
};

}  // namespace troupe::test
