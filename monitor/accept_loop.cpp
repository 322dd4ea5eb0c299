#include "monitor/accept_loop.hpp"

namespace troupe::monitor {

AcceptLoop::AcceptLoop(boost::asio::ip::tcp::acceptor& acceptor, std::function<void(Socket)> accepted, Failed failed)
    : acceptor_(acceptor), pause_(acceptor.get_executor()), accepted_(std::move(accepted)), failed_(std::move(failed)) {}

void AcceptLoop::start() {
  acceptor_.async_accept([this](const boost::system::error_code& error, Socket socket) {
    if (error == boost::asio::error::operation_aborted || !acceptor_.is_open()) return;
    if (!error) {
      accepted_(std::move(socket));
      return start();
    }
    failed_(error);
    pause_.expires_after(retry_after);
    pause_.async_wait([this](const boost::system::error_code& cancelled) {
      if (!cancelled) start();
    });
  });
}

}  // namespace troupe::monitor
