// The /metrics server (monitor/metrics_http.hpp) against slow and idle clients: it holds a bounded
// number of connections, closes one that has not finished its request in time, and at the
// process's open-file limit pauses without spinning and answers again once descriptors are free.

#include <catch2/catch.hpp>

#include <chrono>
#include <thread>
#include <vector>

#include "monitor/metrics_http.hpp"
#include "support/metrics_scrape.hpp"
#include "support/starved_server.hpp"
#include "support/tcp_client.hpp"

using namespace troupe::monitor;
using namespace troupe::test;
using namespace std::chrono_literals;

namespace {

const std::string partial_request = "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\n";  // the blank line never comes

std::unique_ptr<MetricsHttpServer> serve_text() {
  auto server = MetricsHttpServer::start("127.0.0.1", 0, [] { return std::string("troupe_up 1\n"); });
  REQUIRE(server);
  return std::move(*server);
}

}  // namespace

TEST_CASE("slow clients hold a bounded number of connections, each closed after the timeout, and scrapes go on",
          "[metrics]") {
  auto server = serve_text();
  std::vector<TcpClient> slow;
  for (std::size_t i = 0; i < 3 * MetricsHttpServer::max_connections; ++i) {
    slow.emplace_back(server->port());
    slow.back().send(partial_request);
  }
  const auto start = std::chrono::steady_clock::now();
  const HttpResponse scrape = http_get(server->port(), "/metrics", 2);
  INFO(scrape.error);
  CHECK(scrape.status == 200);
  CHECK(scrape.body == "troupe_up 1\n");
  CHECK(std::chrono::steady_clock::now() - start < 2s);
  // The oldest made room for the newer ones; the newest are closed at the timeout.
  CHECK(slow.front().closed_by_server(1s));
  CHECK_FALSE(slow.back().closed_by_server(10ms));
  CHECK(slow.back().closed_by_server(MetricsHttpServer::exchange_timeout + 5s));
}

TEST_CASE("out of file descriptors the metrics server pauses without spinning and answers again once they are free",
          "[metrics]") {
  std::unique_ptr<MetricsHttpServer> server;  // lives in the child
  StarvedServer starved(64, [&] {
    server = serve_text();
    return server->port();
  });
  std::vector<TcpClient> clients;
  for (int i = 0; i < 4; ++i) {
    clients.emplace_back(starved.port());
    clients.back().send("GET /metrics HTTP/1.0\r\n\r\n");
  }
  const double cpu_before = cpu_seconds(starved.pid());
  std::this_thread::sleep_for(2s);
  const double cpu_used = cpu_seconds(starved.pid()) - cpu_before;
  INFO("the server's process used " << cpu_used << " s of CPU in 2 s at its descriptor limit");
  CHECK(cpu_used < 0.5);

  starved.release();
  const HttpResponse scrape = http_get(starved.port(), "/metrics", 5);
  INFO(scrape.error);
  CHECK(scrape.status == 200);
  CHECK(clients[0].receive(12, 5s));
}
