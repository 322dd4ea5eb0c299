#pragma once
// A loopback port something listens on, for tests of "the port is in use" errors: bound and
// listening on 127.0.0.1 from construction until the object goes away.

namespace troupe::test {

class BusyPort {
 public:
  // On a port the kernel picks (in its ephemeral range).
  BusyPort();
  // On `port`, for a test that needs the ports beside it free too: pick them with
  // launch::unclaimed_port, below the range where outgoing connections take theirs.
  explicit BusyPort(int port);
  ~BusyPort();
  BusyPort(const BusyPort&) = delete;
  BusyPort& operator=(const BusyPort&) = delete;

  int port() const { return port_; }

 private:
  int socket_ = -1;
  int port_ = 0;
};

}  // namespace troupe::test
