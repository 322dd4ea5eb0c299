#pragma once
// The HTTP side of /metrics and of the job's web page: each request's target and head go to a
// handler, whose reply is sent, one request per connection. A node's /metrics answers GET /metrics
// with a text produced on demand (the Prometheus exposition) and anything else 404. It runs a Boost.Asio loop on a
// thread of its own with an ordinary stack. prometheus-cpp's pull library (civetweb) is not used:
// civetweb starts its threads with a fixed 104 KiB stack out of which glibc takes every library's
// static TLS (OpenBLAS alone 60 KiB, the CUDA runtime 8 KiB more), which left too little for a
// scrape — node processes died of SIGSEGV inside civetweb when scraped.
//
// Slow or idle clients cost the process little and never its training: at most `max_connections`
// are open (a new one closes the oldest), each is closed `exchange_timeout` after it was accepted,
// whatever it sent, and an accept that fails for want of descriptors pauses instead of spinning
// (monitor/accept_loop.hpp).

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "compute/expected.hpp"

namespace troupe::monitor {

struct HttpReply {
  std::string status = "200 OK";
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};
// Given the request line's target ("/data?page=2") and the whole request head (request line and
// headers); called on the server's thread.
using HttpHandler = std::function<HttpReply(std::string_view target, std::string_view head)>;

class MetricsHttpServer {
 public:
  static constexpr std::size_t max_connections = 32;
  static constexpr std::chrono::seconds exchange_timeout{5};

  // Listens on bind:port (port 0: a free one) and serves `body()` at /metrics from its thread.
  static Expected<std::unique_ptr<MetricsHttpServer>> start(const std::string& bind, int port,
                                                            std::function<std::string()> body);
  // Listens on bind:port and answers every GET with `handler`'s reply (anything else: 405).
  static Expected<std::unique_ptr<MetricsHttpServer>> serve(const std::string& bind, int port, HttpHandler handler);
  ~MetricsHttpServer();  // stops accepting and answering, joins the thread
  MetricsHttpServer(const MetricsHttpServer&) = delete;
  MetricsHttpServer& operator=(const MetricsHttpServer&) = delete;

  int port() const;

 private:
  struct Impl;
  explicit MetricsHttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::monitor
