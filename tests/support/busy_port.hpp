#pragma once
// A loopback port something listens on, for tests of "the port is in use" errors: bound and
// listening on 127.0.0.1 from construction until the object goes away.

namespace troupe::test {

class BusyPort {
 public:
  BusyPort();
  ~BusyPort();
  BusyPort(const BusyPort&) = delete;
  BusyPort& operator=(const BusyPort&) = delete;

  int port() const { return port_; }

 private:
  int socket_ = -1;
  int port_ = 0;
};

}  // namespace troupe::test
