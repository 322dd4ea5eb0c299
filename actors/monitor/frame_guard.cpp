#include "actors/monitor/frame_guard.hpp"

#include <array>
#include <set>
#include <thread>

#include <boost/asio.hpp>

namespace troupe::actors {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

constexpr std::size_t basp_header = 32;  // caf::io::basp::header_size
constexpr std::uint8_t client_handshake = 0x01, last_operation = 0x06;  // caf::io::basp::message_type
constexpr std::size_t chunk = 64 * 1024;

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket client, const FrameGuardOptions& options, std::function<void(Session*)> ended)
      : client_(std::move(client)), upstream_(client_.get_executor()), options_(options), ended_(std::move(ended)) {
    boost::system::error_code ec;
    const auto peer = client_.remote_endpoint(ec);
    peer_ = ec ? "?" : peer.address().to_string() + ":" + std::to_string(peer.port());
  }

  void start() {
    auto self = shared_from_this();
    upstream_.async_connect({asio::ip::make_address_v4("127.0.0.1"), options_.target},
                            [self](boost::system::error_code ec) {
                              if (ec) return self->close();
                              self->read_header();
                              self->pump_down();
                            });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    boost::system::error_code ignored;
    client_.close(ignored);
    upstream_.close(ignored);
    ended_(this);
  }

 private:
  void refuse(const std::string& why) {
    if (options_.refused) options_.refused("refused " + peer_ + ": " + why + "; connection closed");
    close();
  }

  void read_header() {
    auto self = shared_from_this();
    asio::async_read(client_, asio::buffer(header_), [self](boost::system::error_code ec, std::size_t) {
      if (ec) return self->close();
      const std::uint8_t operation = self->header_[0];
      const std::uint32_t length = std::uint32_t{self->header_[4]} << 24 | std::uint32_t{self->header_[5]} << 16 |
                                   std::uint32_t{self->header_[6]} << 8 | std::uint32_t{self->header_[7]};
      if (self->first_ && operation != client_handshake)
        return self->refuse("not a CAF peer (its first bytes are no BASP client handshake)");
      if (operation > last_operation) return self->refuse("a frame with unknown BASP operation " + std::to_string(operation));
      if (length > self->options_.max_payload)
        return self->refuse("a frame of " + std::to_string(length) + " bytes (limit " +
                            std::to_string(self->options_.max_payload) + ")");
      self->first_ = false;
      self->remaining_ = length;
      asio::async_write(self->upstream_, asio::buffer(self->header_), [self](boost::system::error_code ec, std::size_t) {
        if (ec) return self->close();
        self->forward_payload();
      });
    });
  }

  void forward_payload() {
    if (remaining_ == 0) return read_header();
    auto self = shared_from_this();
    client_.async_read_some(asio::buffer(up_.data(), std::min<std::size_t>(remaining_, chunk)),
                            [self](boost::system::error_code ec, std::size_t n) {
                              if (ec) return self->close();
                              self->remaining_ -= n;
                              asio::async_write(self->upstream_, asio::buffer(self->up_.data(), n),
                                                [self](boost::system::error_code ec, std::size_t) {
                                                  if (ec) return self->close();
                                                  self->forward_payload();
                                                });
                            });
  }

  void pump_down() {
    auto self = shared_from_this();
    upstream_.async_read_some(asio::buffer(down_), [self](boost::system::error_code ec, std::size_t n) {
      if (ec) return self->close();
      asio::async_write(self->client_, asio::buffer(self->down_.data(), n),
                        [self](boost::system::error_code ec, std::size_t) {
                          if (ec) return self->close();
                          self->pump_down();
                        });
    });
  }

  tcp::socket client_, upstream_;
  const FrameGuardOptions& options_;
  std::function<void(Session*)> ended_;
  std::string peer_;
  std::array<std::uint8_t, basp_header> header_{};
  std::array<char, chunk> up_{}, down_{};
  std::size_t remaining_ = 0;
  bool first_ = true, closed_ = false;
};

}  // namespace

struct FrameGuard::Impl {
  FrameGuardOptions options;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  std::set<std::shared_ptr<Session>> sessions;
  std::thread thread;

  void accept() {
    acceptor.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;
      if (sessions.size() >= options.max_connections) {
        if (options.refused)
          options.refused("refused a connection: " + std::to_string(sessions.size()) + " are open (limit " +
                          std::to_string(options.max_connections) + ")");
      } else {
        auto session = std::make_shared<Session>(std::move(socket), options, [this](Session* ended) {
          for (auto it = sessions.begin(); it != sessions.end(); ++it)
            if (it->get() == ended) {
              // Erased after the handler that closed it has returned.
              asio::post(io, [this, keep = *it] { sessions.erase(keep); });
              break;
            }
        });
        sessions.insert(session);
        session->start();
      }
      accept();
    });
  }
};

FrameGuard::FrameGuard(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Expected<std::unique_ptr<FrameGuard>> FrameGuard::start(FrameGuardOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  boost::system::error_code ec;
  const auto address = asio::ip::make_address_v4(impl->options.bind, ec);
  if (ec) return Error{"'" + impl->options.bind + "' is not an IPv4 address"};
  const tcp::endpoint endpoint(address, impl->options.port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Error{ec.message()};
  impl->accept();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<FrameGuard>(new FrameGuard(std::move(impl)));
}

FrameGuard::~FrameGuard() {
  asio::post(impl_->io, [impl = impl_.get()] {
    boost::system::error_code ignored;
    impl->acceptor.close(ignored);
    for (const auto& session : std::set(impl->sessions)) session->close();
    impl->io.stop();
  });
  impl_->thread.join();
}

std::uint16_t FrameGuard::port() const { return impl_->acceptor.local_endpoint().port(); }

void FrameGuard::retarget(std::uint16_t target) {
  asio::post(impl_->io, [impl = impl_.get(), target] { impl->options.target = target; });
}

}  // namespace troupe::actors
