#include "monitor/job_web.hpp"

#include <charconv>
#include <chrono>
#include <optional>

#include "monitor/job_page_data.hpp"

namespace troupe::monitor {
namespace {

// The value of `name` in the target's query ("/data?page=2&token=x"), undecoded; none if absent.
std::optional<std::string_view> query_value(std::string_view target, std::string_view name) {
  const std::size_t question = target.find('?');
  if (question == std::string_view::npos) return std::nullopt;
  std::string_view query = target.substr(question + 1);
  while (!query.empty()) {
    const std::size_t amp = query.find('&');
    const std::string_view pair = query.substr(0, amp);
    const std::size_t eq = pair.find('=');
    if (pair.substr(0, eq) == name) return eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
  return std::nullopt;
}

int query_int(std::string_view target, std::string_view name, int fallback) {
  const auto text = query_value(target, name);
  int value = fallback;
  if (text && std::from_chars(text->data(), text->data() + text->size(), value).ec != std::errc()) return fallback;
  return value;
}

// The value of header `name` (matched without regard to case), trimmed; empty if absent.
std::string_view header_value(std::string_view head, std::string_view name) {
  std::size_t at = head.find("\r\n");
  while (at != std::string_view::npos && at + 2 < head.size()) {
    const std::size_t end = head.find("\r\n", at + 2);
    const std::string_view line = head.substr(at + 2, end == std::string_view::npos ? end : end - at - 2);
    const std::size_t colon = line.find(':');
    if (colon == name.size() && std::equal(name.begin(), name.end(), line.begin(), [](char a, char b) {
          return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
        })) {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
      return value;
    }
    at = end;
  }
  return {};
}

// Compares in time independent of where the strings differ.
bool same_secret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char differ = 0;
  for (std::size_t i = 0; i < a.size(); ++i) differ |= static_cast<unsigned char>(a[i] ^ b[i]);
  return differ == 0;
}

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

}  // namespace

Expected<std::unique_ptr<JobWeb>> JobWeb::serve(const std::string& bind, int port, std::string token) {
  std::unique_ptr<JobWeb> web(new JobWeb(bind, std::move(token)));
  auto server = MetricsHttpServer::serve(
      bind, port,
      [self = web.get()](std::string_view target, std::string_view head) { return self->answer(target, head); });
  if (!server) return server.error();
  web->server_ = std::move(*server);
  return web;
}

void JobWeb::publish(JobSnapshot snapshot) {
  auto shared = std::make_shared<const JobSnapshot>(std::move(snapshot));
  std::lock_guard lock(mutex_);
  snapshot_ = std::move(shared);
}

std::string JobWeb::url() const { return "http://" + bind_ + ":" + std::to_string(port()) + "/?token=" + token_; }

bool JobWeb::authorized(std::string_view target, std::string_view head) const {
  if (const auto in_url = query_value(target, "token")) return same_secret(*in_url, token_);
  const std::string_view header = header_value(head, "Authorization");
  constexpr std::string_view bearer = "Bearer ";
  return header.substr(0, bearer.size()) == bearer && same_secret(header.substr(bearer.size()), token_);
}

HttpReply JobWeb::answer(std::string_view target, std::string_view head) const {
  if (!authorized(target, head)) return {"401 Unauthorized", "text/plain", "401 unauthorized\n"};
  const std::string_view path = target.substr(0, target.find('?'));
  std::shared_ptr<const JobSnapshot> snapshot;
  {
    std::lock_guard lock(mutex_);
    snapshot = snapshot_;
  }
  if (path == "/") return {"200 OK", "text/html; charset=utf-8", std::string(job_page_html())};
  if (path == "/data")
    return {"200 OK", "application/json",
            page_data(*snapshot, query_int(target, "page", 0), query_int(target, "per_page", default_tiles_per_page))
                .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
  if (path == "/metrics")
    return {"200 OK", "text/plain; version=0.0.4; charset=utf-8", job_metrics_text(*snapshot, unix_now())};
  return {"404 Not Found", "text/plain", "served here: /, /data, /metrics\n"};
}

}  // namespace troupe::monitor
