#include "support/metrics_scrape.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

namespace troupe::test {

HttpResponse http_get(int port, const std::string& path, int timeout_seconds) {
  HttpResponse response;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return {0, "", std::string("socket: ") + std::strerror(errno)};
  timeval timeout{timeout_seconds, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof timeout);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, sizeof timeout);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    response.error = "connect to port " + std::to_string(port) + ": " + std::strerror(errno);
    ::close(fd);
    return response;
  }
  // HTTP/1.0 without Accept-Encoding: the server answers plain text and closes when done.
  const std::string request = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
    response.error = std::string("send: ") + std::strerror(errno);
    ::close(fd);
    return response;
  }
  std::string raw;
  char buffer[4096];
  for (ssize_t n; (n = ::recv(fd, buffer, sizeof buffer, 0)) != 0;) {
    if (n < 0) {
      response.error = std::string("recv: ") + std::strerror(errno);
      ::close(fd);
      return response;
    }
    raw.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fd);
  const auto header_end = raw.find("\r\n\r\n");
  std::smatch status;
  if (header_end == std::string::npos || !std::regex_search(raw, status, std::regex("^HTTP/1\\.[01] (\\d{3})"))) {
    response.error = "not an HTTP response: " + raw.substr(0, 80);
    return response;
  }
  response.status = std::stoi(status[1].str());
  response.body = raw.substr(header_end + 4);
  return response;
}

namespace {

const std::regex metric_name("[a-zA-Z_:][a-zA-Z0-9_:]*");
const std::regex label_name("[a-zA-Z_][a-zA-Z0-9_]*");
const std::set<std::string> metric_types{"counter", "gauge", "histogram", "summary", "untyped"};

// A sample value: a float as strtod reads it whole, or NaN, +Inf, -Inf.
std::optional<double> parse_value(const std::string& text) {
  if (text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  if (text == "+Inf") return std::numeric_limits<double>::infinity();
  if (text == "-Inf") return -std::numeric_limits<double>::infinity();
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size()) return std::nullopt;
  return value;
}

// Reads `{name="value",...}` from line[pos]; the error says what is wrong.
std::optional<std::string> parse_labels(const std::string& line, std::size_t& pos,
                                        std::map<std::string, std::string>& labels) {
  ++pos;  // '{'
  while (pos < line.size() && line[pos] != '}') {
    const auto equals = line.find('=', pos);
    if (equals == std::string::npos) return "a label without '='";
    const std::string name = line.substr(pos, equals - pos);
    if (!std::regex_match(name, label_name)) return "bad label name '" + name + "'";
    pos = equals + 1;
    if (pos >= line.size() || line[pos] != '"') return "label " + name + " has no quoted value";
    std::string value;
    for (++pos; pos < line.size() && line[pos] != '"'; ++pos) {
      if (line[pos] != '\\') {
        value += line[pos];
        continue;
      }
      if (++pos == line.size()) return "label " + name + " ends in a backslash";
      if (line[pos] == 'n') value += '\n';
      else if (line[pos] == '\\' || line[pos] == '"') value += line[pos];
      else return "label " + name + " has the unknown escape \\" + std::string(1, line[pos]);
    }
    if (pos == line.size()) return "label " + name + " is not closed";
    if (!labels.emplace(name, value).second) return "label " + name + " appears twice";
    ++pos;  // closing quote
    if (pos < line.size() && line[pos] == ',') ++pos;
  }
  if (pos == line.size()) return "labels are not closed";
  ++pos;  // '}'
  return std::nullopt;
}

// The family a sample belongs to: a histogram's _bucket, _sum and _count belong to it.
std::string family_of(const std::string& sample, const std::map<std::string, std::string>& types) {
  for (const char* suffix : {"_bucket", "_sum", "_count"}) {
    const std::string s(suffix);
    if (sample.size() > s.size() && sample.compare(sample.size() - s.size(), s.size(), s) == 0) {
      const std::string family = sample.substr(0, sample.size() - s.size());
      const auto type = types.find(family);
      if (type != types.end() && (type->second == "histogram" || (type->second == "summary" && s != "_bucket")))
        return family;
    }
  }
  return sample;
}

}  // namespace

Exposition parse_exposition(const std::string& text) {
  Exposition out;
  std::set<std::string> families_with_samples;
  std::istringstream lines(text);
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    auto problem = [&](const std::string& what) {
      out.problems.push_back("line " + std::to_string(number) + ": " + what + ": " + line);
    };
    if (line.empty()) continue;
    if (line[0] == '#') {
      std::istringstream words(line.substr(1));
      std::string keyword, name;
      words >> keyword >> name;
      if (keyword != "HELP" && keyword != "TYPE") continue;  // a plain comment
      if (!std::regex_match(name, metric_name)) {
        problem(keyword + " names no valid metric");
        continue;
      }
      std::string rest;
      std::getline(words >> std::ws, rest);
      if (keyword == "HELP") {
        if (!out.help.emplace(name, rest).second) problem("a second HELP for " + name);
      } else if (!metric_types.count(rest)) {
        problem("unknown type '" + rest + "'");
      } else if (families_with_samples.count(name)) {
        problem("TYPE after the samples of " + name);
      } else if (!out.types.emplace(name, rest).second) {
        problem("a second TYPE for " + name);
      }
      continue;
    }
    MetricSample sample;
    std::size_t pos = line.find_first_of("{ ");
    if (pos == std::string::npos) {
      problem("a sample without a value");
      continue;
    }
    sample.name = line.substr(0, pos);
    if (!std::regex_match(sample.name, metric_name)) {
      problem("bad metric name '" + sample.name + "'");
      continue;
    }
    if (line[pos] == '{') {
      if (auto bad = parse_labels(line, pos, sample.labels)) {
        problem(*bad);
        continue;
      }
    }
    std::istringstream fields(line.substr(pos));
    std::string value_text, timestamp, extra;
    fields >> value_text >> timestamp >> extra;
    const auto value = parse_value(value_text);
    if (!value) {
      problem("'" + value_text + "' is not a float");
      continue;
    }
    if (!extra.empty() || (!timestamp.empty() && !std::regex_match(timestamp, std::regex("-?[0-9]+")))) {
      problem("text after the value that is not a timestamp");
      continue;
    }
    sample.value = *value;
    const std::string family = family_of(sample.name, out.types);
    if (out.types.count(family) && out.types.at(family) == "histogram" && sample.name == family + "_bucket" &&
        !sample.labels.count("le"))
      problem("a histogram bucket without le");
    families_with_samples.insert(family);
    out.samples.push_back(std::move(sample));
  }
  return out;
}

std::vector<MetricSample> Exposition::find(const std::string& name,
                                           const std::map<std::string, std::string>& labels) const {
  std::vector<MetricSample> found;
  for (const MetricSample& sample : samples) {
    if (sample.name != name) continue;
    bool all = true;
    for (const auto& [key, value] : labels) {
      const auto it = sample.labels.find(key);
      all = all && it != sample.labels.end() && it->second == value;
    }
    if (all) found.push_back(sample);
  }
  return found;
}

double Exposition::value(const std::string& name, const std::map<std::string, std::string>& labels) const {
  const auto found = find(name, labels);
  if (found.size() != 1) return std::numeric_limits<double>::quiet_NaN();
  return found.front().value;
}

}  // namespace troupe::test
