#include "monitor/metrics_http.hpp"

#include <list>
#include <string_view>
#include <thread>

#include <boost/asio.hpp>

#include "monitor/accept_loop.hpp"

namespace troupe::monitor {
namespace {

namespace asio = boost::asio;
using asio::ip::tcp;

constexpr std::size_t max_request_bytes = 8192;  // a scrape's request line and headers fit many times

std::string response(const HttpReply& reply) {
  std::string text = "HTTP/1.1 ";
  text.append(reply.status).append("\r\nContent-Type: ").append(reply.content_type);
  text.append("\r\nContent-Length: ").append(std::to_string(reply.body.size()));
  text.append("\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n");
  return text + reply.body;
}

}  // namespace

// Named, not anonymous: Impl (declared in the header) holds Exchanges, and a class with external
// linkage must not hold a type of an anonymous namespace (GCC's -Wsubobject-linkage, in a unity
// batch).
namespace metrics_http_exchanges {

using asio::ip::tcp;

// One connection: read the request head, answer, close; closed at the deadline whatever it is doing.
class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(tcp::socket socket, const HttpHandler& handler)
      : socket_(std::move(socket)), deadline_(socket_.get_executor()), request_(max_request_bytes), handler_(handler) {}

  bool open() const { return socket_.is_open(); }

  void start() {
    deadline_.expires_after(MetricsHttpServer::exchange_timeout);
    deadline_.async_wait([self = shared_from_this()](const boost::system::error_code& error) {
      if (!error) self->close();
    });
    asio::async_read_until(socket_, request_, "\r\n\r\n",
                           [self = shared_from_this()](const boost::system::error_code& error, std::size_t) {
                             if (error) return self->close();
                             self->answer();
                           });
  }

  void close() {
    deadline_.cancel();
    boost::system::error_code ignored;
    socket_.close(ignored);
  }

 private:
  void answer() {
    const std::string head(asio::buffers_begin(request_.data()), asio::buffers_end(request_.data()));
    const std::string_view line = std::string_view(head).substr(0, head.find("\r\n"));
    const std::size_t target_end = line.find(' ', 4);
    reply_ = line.rfind("GET ", 0) == 0 && target_end != std::string_view::npos
                 ? response(handler_(line.substr(4, target_end - 4), head))
                 : response({"405 Method Not Allowed", "text/plain", "only GET is served here\n"});
    asio::async_write(socket_, asio::buffer(reply_),
                      [self = shared_from_this()](const boost::system::error_code&, std::size_t) {
                        boost::system::error_code ignored;
                        self->socket_.shutdown(tcp::socket::shutdown_both, ignored);
                        self->close();
                      });
  }

  tcp::socket socket_;
  asio::steady_timer deadline_;
  asio::streambuf request_;
  const HttpHandler& handler_;
  std::string reply_;
};

}  // namespace metrics_http_exchanges

using metrics_http_exchanges::Exchange;

struct MetricsHttpServer::Impl {
  asio::io_context io;
  tcp::acceptor acceptor{io};
  AcceptLoop accepting{acceptor, [this](tcp::socket socket) { admit(std::move(socket)); },
                       [this](const boost::system::error_code&) { close_oldest(); }};
  std::list<std::shared_ptr<Exchange>> exchanges;  // oldest first
  HttpHandler handler;
  std::thread thread;

  void admit(tcp::socket socket) {
    exchanges.remove_if([](const auto& exchange) { return !exchange->open(); });
    if (exchanges.size() >= max_connections) close_oldest();
    exchanges.push_back(std::make_shared<Exchange>(std::move(socket), handler));
    exchanges.back()->start();
  }

  // Makes room for a new scrape (or frees descriptors): the oldest connection has had its chance.
  void close_oldest() {
    if (exchanges.empty()) return;
    exchanges.front()->close();
    exchanges.pop_front();
  }
};

Expected<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::start(const std::string& bind, int port,
                                                                      std::function<std::string()> body) {
  return serve(bind, port, [body = std::move(body)](std::string_view target, std::string_view) -> HttpReply {
    if (target == "/metrics" || target.rfind("/metrics?", 0) == 0)
      return {"200 OK", "text/plain; version=0.0.4; charset=utf-8", body()};
    return {"404 Not Found", "text/plain", "only /metrics is served here\n"};
  });
}

Expected<std::unique_ptr<MetricsHttpServer>> MetricsHttpServer::serve(const std::string& bind, int port,
                                                                      HttpHandler handler) {
  auto impl = std::make_unique<Impl>();
  impl->handler = std::move(handler);
  boost::system::error_code error;
  const auto address = asio::ip::make_address_v4(bind, error);
  if (error) return Error{"'" + bind + "' is not an IPv4 address"};
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  impl->acceptor.open(endpoint.protocol(), error);
  if (!error) impl->acceptor.set_option(tcp::acceptor::reuse_address(true), error);
  if (!error) impl->acceptor.bind(endpoint, error);
  if (!error) impl->acceptor.listen(asio::socket_base::max_listen_connections, error);
  if (error) return Error{error.message()};
  impl->accepting.start();
  impl->thread = std::thread([io = &impl->io] { io->run(); });
  return std::unique_ptr<MetricsHttpServer>(new MetricsHttpServer(std::move(impl)));
}

MetricsHttpServer::MetricsHttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

MetricsHttpServer::~MetricsHttpServer() {
  impl_->io.stop();
  impl_->thread.join();
}

int MetricsHttpServer::port() const { return impl_->acceptor.local_endpoint().port(); }

}  // namespace troupe::monitor
