#pragma once
// Scraping a Prometheus endpoint the way Prometheus does, for the metrics tests: a plain HTTP/1.0
// GET over a socket, and a strict reader of the text exposition format (version 0.0.4) that
// lists every line it cannot accept instead of skipping it.

#include <map>
#include <string>
#include <vector>

namespace troupe::test {

struct HttpResponse {
  int status = 0;     // 0 when no response came (the error says why)
  std::string body;
  std::string error;
};

// GET http://127.0.0.1:port/path, waiting at most `timeout_seconds` for each read.
HttpResponse http_get(int port, const std::string& path, int timeout_seconds = 5);

struct MetricSample {
  std::string name;  // as written: troupe_step_seconds_bucket, not the family
  std::map<std::string, std::string> labels;
  double value = 0;
};

struct Exposition {
  std::vector<MetricSample> samples;
  std::map<std::string, std::string> types;  // family → counter, gauge, histogram, summary, untyped
  std::map<std::string, std::string> help;   // family → its HELP text
  std::vector<std::string> problems;         // "line 7: ...", one per line not in the format

  // The samples called `name` whose labels include every pair of `labels`.
  std::vector<MetricSample> find(const std::string& name, const std::map<std::string, std::string>& labels = {}) const;
  // The one such sample's value; NaN when there is none or more than one.
  double value(const std::string& name, const std::map<std::string, std::string>& labels = {}) const;
};

Exposition parse_exposition(const std::string& text);

}  // namespace troupe::test
