#pragma once
// Plain loopback TCP clients for tests of the ports a stranger can reach: connections that stay
// open until the object goes away, made from a chosen loopback source address, and the questions a
// test asks of them (did the server say something, did it close the connection).

#include <sys/types.h>

#include <chrono>
#include <string>

namespace troupe::test {

class TcpClient {
 public:
  // Connects to 127.0.0.1:port from `source` (any 127.x.y.z is this host); the connection may
  // still be in progress when the constructor returns (`wait` for the first bytes says so).
  explicit TcpClient(int port, const std::string& source = "127.0.0.1");
  ~TcpClient();
  TcpClient(TcpClient&& other) noexcept;
  TcpClient(const TcpClient&) = delete;
  TcpClient& operator=(const TcpClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  void send(const std::string& bytes);
  // Waits up to `timeout` for `bytes` more bytes from the server; false when fewer came.
  bool receive(std::size_t bytes, std::chrono::milliseconds timeout);
  // Waits up to `timeout` for the server to close the connection (what it sends first is read
  // and dropped); false when it is still open.
  bool closed_by_server(std::chrono::milliseconds timeout);

 private:
  int fd_ = -1;
};

// CPU seconds (user and system) a process has used so far.
double cpu_seconds(pid_t pid);
// How many descriptors a process holds open.
int open_descriptors(pid_t pid);

}  // namespace troupe::test
