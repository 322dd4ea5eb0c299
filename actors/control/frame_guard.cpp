#include "actors/control/frame_guard.hpp"

#include <algorithm>
#include <array>
#include <future>
#include <list>
#include <thread>

#include <boost/asio.hpp>

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "monitor/accept_loop.hpp"

namespace troupe::actors {
namespace {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

constexpr std::size_t basp_header = 32;  // caf::io::basp::header_size
constexpr std::uint8_t client_handshake = 0x01, last_operation = 0x06;  // caf::io::basp::message_type
constexpr std::size_t chunk = 64 * 1024;

std::string milliseconds_text(std::chrono::milliseconds span) {
  return span.count() % 1000 == 0 ? std::to_string(span.count() / 1000) + " s" : std::to_string(span.count()) + " ms";
}

// Under attack every new connection is a refusal: the log gets the first lines of each 10 s, and
// the next refusal after that brings the count of those left out.
class RefusalLog {
 public:
  explicit RefusalLog(std::function<void(const std::string&)> sink) : sink_(std::move(sink)) {}

  void operator()(const std::string& line) {
    const auto now = std::chrono::steady_clock::now();
    if (now - window_start_ >= window) {
      if (left_out_ > 0) sink_(std::to_string(left_out_) + " more refusal(s) in the last " + std::to_string(window.count()) +
                           " s not logged");
      window_start_ = now;
      logged_ = left_out_ = 0;
    }
    if (logged_ < logged_per_window) {
      ++logged_;
      sink_(line);
    } else {
      ++left_out_;
    }
  }

 private:
  static constexpr std::chrono::seconds window{10};
  static constexpr int logged_per_window = 20;
  std::function<void(const std::string&)> sink_;
  std::chrono::steady_clock::time_point window_start_{};
  int logged_ = 0, left_out_ = 0;
};

}  // namespace

// Named, not anonymous: FrameGuard::Impl holds sessions, and GCC warns of a member whose type is
// file-local (-Wsubobject-linkage) where a unity build compiles this file inside another.
namespace frame_guard_sessions {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket client, const FrameGuardOptions& options, std::function<void(Session*)> ended)
      : client_(std::move(client)),
        upstream_(client_.get_executor()),
        handshake_deadline_(client_.get_executor()),
        options_(options),
        ended_(std::move(ended)) {
    boost::system::error_code ec;
    const auto peer = client_.remote_endpoint(ec);
    source_ = ec ? "?" : peer.address().to_string();
    peer_ = ec ? "?" : source_ + ":" + std::to_string(peer.port());
  }

  bool open() const { return !closed_; }
  // Until its first frame has passed.
  bool waiting() const { return first_; }
  const std::string& source() const { return source_; }

  void start() {
    auto self = shared_from_this();
    watch_reachability();
    handshake_deadline_.expires_after(options_.handshake_timeout);
    handshake_deadline_.async_wait([self](boost::system::error_code ec) {
      if (!ec && self->first_)
        self->refuse("no BASP handshake within " + milliseconds_text(self->options_.handshake_timeout));
    });
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
    handshake_deadline_.cancel();
    boost::system::error_code ignored;
    client_.close(ignored);
    upstream_.close(ignored);
    ended_(this);
  }

  // A read or write of the peer's side failed: a timeout there means its host answered nothing
  // for unreachable_after (the kernel's keepalive or user timeout gave up).
  void lost(const boost::system::error_code& ec) {
    if (ec == asio::error::timed_out && !closed_ && options_.unreachable)
      options_.unreachable(source_, std::chrono::duration<double>(options_.unreachable_after).count());
    close();
  }

  void refuse(const std::string& why) {
    if (options_.refused) options_.refused("refused " + peer_ + ": " + why + "; connection closed");
    close();
  }

 private:
  void watch_reachability() {
    const auto after = options_.unreachable_after;
    if (after.count() <= 0) return;
    const int fd = client_.native_handle(), on = 1, idle = 1, interval = 1;
    const int probes = std::max<int>(1, static_cast<int>(after.count() / 1000) - idle);
    const unsigned user_timeout = static_cast<unsigned>(after.count());
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &interval, sizeof interval);
    ::setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &probes, sizeof probes);
    ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout);
  }

  void read_header() {
    auto self = shared_from_this();
    asio::async_read(client_, asio::buffer(header_), [self](boost::system::error_code ec, std::size_t) {
      if (ec) return self->lost(ec);
      const std::uint8_t operation = self->header_[0];
      const std::uint32_t length = std::uint32_t{self->header_[4]} << 24 | std::uint32_t{self->header_[5]} << 16 |
                                   std::uint32_t{self->header_[6]} << 8 | std::uint32_t{self->header_[7]};
      if (self->first_ && operation != client_handshake)
        return self->refuse("not a CAF peer (its first bytes are no BASP client handshake)");
      if (operation > last_operation) return self->refuse("a frame with unknown BASP operation " + std::to_string(operation));
      if (length > self->options_.max_payload)
        return self->refuse("a frame of " + std::to_string(length) + " bytes (limit " +
                            std::to_string(self->options_.max_payload) + ")");
      if (self->first_) self->handshake_deadline_.cancel();
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
                              if (ec) return self->lost(ec);
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
                          if (ec) return self->lost(ec);
                          self->pump_down();
                        });
    });
  }

  tcp::socket client_, upstream_;
  asio::steady_timer handshake_deadline_;
  const FrameGuardOptions& options_;
  std::function<void(Session*)> ended_;
  std::string source_, peer_;
  std::array<std::uint8_t, basp_header> header_{};
  std::array<char, chunk> up_{}, down_{};
  std::size_t remaining_ = 0;
  bool first_ = true, closed_ = false;
};

}  // namespace frame_guard_sessions

struct FrameGuard::Impl {
  using Session = frame_guard_sessions::Session;

  FrameGuardOptions options;
  asio::io_context io;
  tcp::acceptor acceptor{io};
  monitor::AcceptLoop accepting{acceptor, [this](tcp::socket socket) { admit(std::move(socket)); },
                                [this](const boost::system::error_code& error) { accept_failed(error); }};
  std::list<std::shared_ptr<Session>> sessions;  // oldest first
  bool accept_failing = false;
  std::thread thread;

  void report(const std::string& line) const {
    if (options.refused) options.refused(line);
  }

  std::size_t count(bool waiting, const std::string* source = nullptr) const {
    return static_cast<std::size_t>(std::count_if(sessions.begin(), sessions.end(), [&](const auto& session) {
      return session->open() && session->waiting() == waiting && (!source || session->source() == *source);
    }));
  }

  // Closes the oldest connection still waiting for its handshake (from `source` when given).
  bool close_oldest_waiting(const std::string& why, const std::string* source = nullptr) {
    for (const auto& session : sessions)
      if (session->open() && session->waiting() && (!source || session->source() == *source)) {
        session->refuse(why);
        return true;
      }
    return false;
  }

  void admit(tcp::socket socket) {
    accept_failing = false;
    if (count(false) >= options.max_connections) {
      report("refused a connection: " + std::to_string(count(false)) + " are open (limit " +
             std::to_string(options.max_connections) + ")");
      return;
    }
    auto session = std::make_shared<Session>(std::move(socket), options, [this](Session* ended) {
      // Erased after the handler that closed it has returned.
      asio::post(io, [this, ended] {
        sessions.remove_if([ended](const auto& session) { return session.get() == ended; });
      });
    });
    if (count(true, &session->source()) >= options.max_waiting_per_source)
      close_oldest_waiting("the oldest of " + std::to_string(options.max_waiting_per_source) +
                               " connections from one address without a handshake (limit per address)",
                           &session->source());
    else if (count(true) >= options.max_waiting)
      close_oldest_waiting("the oldest of " + std::to_string(options.max_waiting) +
                           " connections without a handshake (limit)");
    sessions.push_back(session);
    session->start();
  }

  // Out of descriptors (or another failed accept): free some, and say so once until an accept succeeds.
  void accept_failed(const boost::system::error_code& error) {
    const bool freed = close_oldest_waiting("the oldest connection without a handshake, to free descriptors (" +
                                            error.message() + ")");
    if (accept_failing) return;
    accept_failing = true;
    if (!freed)
      report("cannot accept a connection: " + error.message() + "; retrying every " +
             milliseconds_text(monitor::AcceptLoop::retry_after));
  }
};

FrameGuard::FrameGuard(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Expected<std::unique_ptr<FrameGuard>> FrameGuard::start(FrameGuardOptions options) {
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  if (impl->options.refused) impl->options.refused = RefusalLog(std::move(impl->options.refused));
  boost::system::error_code ec;
  const auto address = asio::ip::make_address_v4(impl->options.bind, ec);
  if (ec) return Error{"'" + impl->options.bind + "' is not an IPv4 address"};
  const tcp::endpoint endpoint(address, impl->options.port);
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return Error{ec.message()};
  impl->accepting.start();
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->io.run(); });
  return std::unique_ptr<FrameGuard>(new FrameGuard(std::move(impl)));
}

FrameGuard::~FrameGuard() {
  asio::post(impl_->io, [impl = impl_.get()] {
    boost::system::error_code ignored;
    impl->acceptor.close(ignored);
    for (const auto& session : std::list(impl->sessions)) session->close();
    impl->io.stop();
  });
  impl_->thread.join();
}

std::uint16_t FrameGuard::port() const { return impl_->acceptor.local_endpoint().port(); }

void FrameGuard::retarget(std::uint16_t target) {
  asio::post(impl_->io, [impl = impl_.get(), target] { impl->options.target = target; });
}

std::size_t FrameGuard::connections() const {
  std::promise<std::size_t> counted;
  asio::post(impl_->io, [impl = impl_.get(), &counted] { counted.set_value(impl->count(false)); });
  return counted.get_future().get();
}

}  // namespace troupe::actors
