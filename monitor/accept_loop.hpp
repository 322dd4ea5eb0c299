#pragma once
// Accepting TCP connections on a Boost.Asio acceptor for as long as it is open, for the servers a
// stranger can reach (the guarded join and control ports, /metrics). A failed accept — out of file
// descriptors above all, EMFILE — is neither retried at once (the listening socket stays readable,
// so that spins a core) nor the end of the port: the owner is told, may free descriptors (close
// its oldest idle connection), and the next accept waits `retry_after`. The port answers again as
// soon as descriptors are free.

#include <chrono>
#include <functional>
#include <utility>  // before Boost.Asio, whose awaitable.hpp uses std::exchange unincluded

#include <boost/asio.hpp>

namespace troupe::monitor {

class AcceptLoop {
 public:
  using Socket = boost::asio::ip::tcp::socket;
  using Failed = std::function<void(const boost::system::error_code&)>;

  static constexpr std::chrono::milliseconds retry_after{100};

  AcceptLoop(boost::asio::ip::tcp::acceptor& acceptor, std::function<void(Socket)> accepted, Failed failed);
  void start();

 private:
  boost::asio::ip::tcp::acceptor& acceptor_;
  boost::asio::steady_timer pause_;
  std::function<void(Socket)> accepted_;
  Failed failed_;
};

}  // namespace troupe::monitor
