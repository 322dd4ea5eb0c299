// The frame guard in front of the join and control ports (actors/control/frame_guard.hpp) under
// abuse: connections that never send a handshake are closed after the timeout; past the bounds on
// waiting connections (in all, and per source address) the oldest waiting one makes room; and at
// the process's open-file limit the guard pauses without spinning and answers again once
// descriptors are free.

#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>
#include <vector>

#include "actors/control/frame_guard.hpp"
#include "support/starved_server.hpp"
#include "support/tcp_client.hpp"

using namespace troupe::actors;
using namespace troupe::test;
using namespace std::chrono_literals;
using Catch::Contains;

namespace {

constexpr std::size_t greeting = 32;  // what the upstream sends first, as CAF sends its server handshake

// Stands in for CAF's listener behind the guard: greets every connection with 32 bytes and keeps it.
class Upstream {
 public:
  Upstream() {
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof address;
    REQUIRE(::bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
    REQUIRE(::listen(listener_, 64) == 0);
    REQUIRE(::getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length) == 0);
    port_ = ntohs(address.sin_port);
    thread_ = std::thread([this] { serve(); });
  }
  ~Upstream() {
    stop_ = true;
    thread_.join();
    for (int fd : accepted_) ::close(fd);
    ::close(listener_);
  }
  std::uint16_t port() const { return port_; }

 private:
  void serve() {
    const std::string hello(greeting, 'h');
    while (!stop_) {
      pollfd readable{listener_, POLLIN, 0};
      if (::poll(&readable, 1, 50) <= 0) continue;
      const int fd = ::accept(listener_, nullptr, nullptr);
      if (fd < 0) continue;
      (void)!::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL);
      accepted_.push_back(fd);
    }
  }

  int listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  std::uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::vector<int> accepted_;
  std::thread thread_;
};

// The guard's refusal lines, as the job's log would get them.
struct Refusals {
  std::mutex mutex;
  std::vector<std::string> lines;
  std::function<void(const std::string&)> sink() {
    return [this](const std::string& line) {
      std::lock_guard lock(mutex);
      lines.push_back(line);
    };
  }
  std::string all() {
    std::lock_guard lock(mutex);
    std::string text;
    for (const auto& line : lines) text += line + "\n";
    return text;
  }
};

}  // namespace

TEST_CASE("a connection that sends no handshake is closed after the timeout and one that does stays", "[frame_guard]") {
  Upstream upstream;
  Refusals refusals;
  FrameGuardOptions options;
  options.target = upstream.port();
  options.handshake_timeout = 500ms;
  options.refused = refusals.sink();
  auto guard = FrameGuard::start(options);
  REQUIRE(guard);

  TcpClient idle((*guard)->port()), peer((*guard)->port());
  REQUIRE(idle.receive(greeting, 5s));
  REQUIRE(peer.receive(greeting, 5s));
  std::string client_handshake(32, '\0');
  client_handshake[0] = '\x01';
  peer.send(client_handshake);

  const auto start = std::chrono::steady_clock::now();
  CHECK(idle.closed_by_server(10s));
  CHECK(std::chrono::steady_clock::now() - start >= 300ms);
  CHECK_FALSE(peer.closed_by_server(1500ms));
  CHECK_THAT(refusals.all(), Contains("no BASP handshake within 500 ms; connection closed"));
}

// The guard's count of connections past their handshake, once it reaches `expected` or 5 s pass.
std::size_t settled_connections(const FrameGuard& guard, std::size_t expected) {
  const auto give_up = std::chrono::steady_clock::now() + 5s;
  while (guard.connections() != expected && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(10ms);
  return guard.connections();
}

TEST_CASE("the guard counts the connections past their handshake until their peers hang up", "[frame_guard]") {
  Upstream upstream;
  FrameGuardOptions options;
  options.target = upstream.port();
  auto guard = FrameGuard::start(options);
  REQUIRE(guard);
  CHECK((*guard)->connections() == 0);
  {
    TcpClient waiting((*guard)->port()), peer((*guard)->port());
    REQUIRE(waiting.receive(greeting, 5s));
    REQUIRE(peer.receive(greeting, 5s));
    std::string client_handshake(32, '\0');
    client_handshake[0] = '\x01';
    peer.send(client_handshake);
    CHECK(settled_connections(**guard, 1) == 1);  // the one still waiting for its handshake is not counted
  }
  CHECK(settled_connections(**guard, 0) == 0);
}

TEST_CASE("past the bounds on waiting connections the oldest makes room, per source address and in all",
          "[frame_guard]") {
  Upstream upstream;
  Refusals refusals;
  FrameGuardOptions options;
  options.target = upstream.port();
  options.max_waiting = 4;
  options.max_waiting_per_source = 2;
  options.handshake_timeout = 60s;
  options.refused = refusals.sink();
  auto guard = FrameGuard::start(options);
  REQUIRE(guard);
  const int port = (*guard)->port();

  // A third waiting connection from 127.0.0.2 closes that address's first; 127.0.0.3's is not touched.
  std::vector<TcpClient> second;
  for (int i = 0; i < 2; ++i) second.emplace_back(port, "127.0.0.2");
  TcpClient third(port, "127.0.0.3");
  for (auto& client : second) REQUIRE(client.receive(greeting, 5s));
  REQUIRE(third.receive(greeting, 5s));
  second.emplace_back(port, "127.0.0.2");
  REQUIRE(second.back().receive(greeting, 5s));
  CHECK(second[0].closed_by_server(5s));
  CHECK_FALSE(second[1].closed_by_server(300ms));
  CHECK_FALSE(third.closed_by_server(10ms));
  CHECK_THAT(refusals.all(), Contains("refused 127.0.0.2:") && Contains("(limit per address)"));

  // Four wait now (127.0.0.2 twice, 127.0.0.3, and this one): a fifth closes the oldest, 127.0.0.2's second.
  TcpClient fourth(port, "127.0.0.4");
  REQUIRE(fourth.receive(greeting, 5s));
  TcpClient fifth(port, "127.0.0.5");
  REQUIRE(fifth.receive(greeting, 5s));
  CHECK(second[1].closed_by_server(5s));
  CHECK_FALSE(third.closed_by_server(300ms));
  CHECK_THAT(refusals.all(), Contains("connections without a handshake (limit)"));
}

TEST_CASE("a flood of refusals is logged 20 lines at a time", "[frame_guard]") {
  Upstream upstream;
  Refusals refusals;
  FrameGuardOptions options;
  options.target = upstream.port();
  options.max_waiting_per_source = 1;
  options.refused = refusals.sink();
  auto guard = FrameGuard::start(options);
  REQUIRE(guard);
  std::vector<TcpClient> flood;
  for (int i = 0; i < 60; ++i) flood.emplace_back((*guard)->port());
  CHECK(flood[58].closed_by_server(5s));  // each closed the one before it
  std::lock_guard lock(refusals.mutex);
  CHECK(refusals.lines.size() == 20);
}

TEST_CASE("out of file descriptors the guard pauses without spinning and answers again once they are free",
          "[frame_guard]") {
  Upstream upstream;
  const std::uint16_t target = upstream.port();
  std::unique_ptr<FrameGuard> guard;  // lives in the child
  StarvedServer server(64, [&] {
    FrameGuardOptions options;
    options.target = target;
    guard = std::move(FrameGuard::start(options).value());
    return static_cast<int>(guard->port());
  });

  std::vector<TcpClient> clients;
  for (int i = 0; i < 4; ++i) clients.emplace_back(server.port());
  const double cpu_before = cpu_seconds(server.pid());
  std::this_thread::sleep_for(2s);
  const double cpu_used = cpu_seconds(server.pid()) - cpu_before;
  INFO("the guard's process used " << cpu_used << " s of CPU in 2 s at its descriptor limit");
  CHECK(cpu_used < 0.5);
  CHECK_FALSE(clients[0].receive(greeting, 10ms));

  server.release();
  for (auto& client : clients) CHECK(client.receive(greeting, 5s));
  TcpClient later(server.port());
  CHECK(later.receive(greeting, 5s));
}
