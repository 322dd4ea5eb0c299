// monitor's loggers in one process: levels per subsystem changed while logging, the identity on
// every line, the file in text and JSON lines. The loggers are the process's own, so every test
// puts back what it changed: level info everywhere, no file.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "monitor/log.hpp"
#include "support/temp_dir.hpp"

using namespace troupe;
using namespace troupe::test;
using Catch::Contains;

namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// Puts the process's loggers back as every test found them.
struct RestoreLoggers {
  ~RestoreLoggers() {
    CHECK(monitor::set_log_level("info", "").ok());
    CHECK(monitor::log_to_file("", monitor::LogFormat::text).ok());
    monitor::set_log_job("-");
    monitor::set_identity(0, "main");
    monitor::set_ranks_in_process(1);
  }
};

// What the process writes to its stdout while `write` runs.
template <class Write>
std::string console_of(const TempDir& dir, Write write) {
  const std::string path = dir.file("console.txt");
  std::fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  const int into = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  REQUIRE(saved >= 0);
  REQUIRE(into >= 0);
  ::dup2(into, STDOUT_FILENO);
  write();
  std::fflush(stdout);
  ::dup2(saved, STDOUT_FILENO);
  ::close(into);
  ::close(saved);
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

TEST_CASE("every subsystem of the fixed list has a logger from the start", "[log]") {
  const std::vector<std::string> expected{"job", "node", "train", "comm", "checkpoint", "drill", "monitor", "launch"};
  CHECK(monitor::log_subsystems() == expected);
  for (const auto& name : expected) CHECK(monitor::logger(name)->name() == name);
  CHECK_THROWS_WITH(monitor::logger("nosuch"), Contains("nosuch"));
}

TEST_CASE("levels set per subsystem change what is written while the process runs", "[log]") {
  RestoreLoggers restore;
  TempDir dir;
  const std::string path = dir.file("logs/node-3.log");
  // Set before the file exists and before "launch" has logged anything: it must still hold.
  REQUIRE(monitor::set_log_level("warn", "launch").ok());
  REQUIRE(monitor::log_to_file(path, monitor::LogFormat::text).ok());
  monitor::set_log_job("3f2a9c1e");
  monitor::set_identity(3, "node");

  monitor::logger("launch")->info("hidden: launch is at warn");
  monitor::logger("launch")->warn("shown: a warning");
  REQUIRE(monitor::set_log_level("debug", "launch").ok());
  monitor::logger("launch")->debug("shown: launch is at debug now");
  monitor::logger("comm")->debug("hidden: comm is still at info");
  REQUIRE(monitor::set_log_level("error", "").ok());
  monitor::logger("train")->warn("hidden: every subsystem is at error");
  monitor::logger("train")->error("shown: an error");

  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 3);
  CHECK_THAT(lines[0], Contains("[3f2a9c1e r3 node] warning launch: shown: a warning"));
  CHECK_THAT(lines[1], Contains("[3f2a9c1e r3 node] debug launch: shown: launch is at debug now"));
  CHECK_THAT(lines[2], Contains("[3f2a9c1e r3 node] error train: shown: an error"));
}

TEST_CASE("JSON lines carry time, level, job, rank, role, subsystem and the message", "[log]") {
  RestoreLoggers restore;
  TempDir dir;
  const std::string path = dir.file("node-1.log");
  REQUIRE(monitor::log_to_file(path, monitor::LogFormat::json).ok());
  monitor::set_log_job("abcd0123");
  monitor::set_identity(1, "trainer");
  monitor::logger("checkpoint")->info("saved \"step 4\"\tto {}", "/tmp/x");

  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 1);
  const auto line = nlohmann::json::parse(lines[0]);
  CHECK(line.at("level") == "info");
  CHECK(line.at("job") == "abcd0123");
  CHECK(line.at("rank") == 1);
  CHECK(line.at("role") == "trainer");
  CHECK(line.at("subsystem") == "checkpoint");
  CHECK(line.at("msg") == "saved \"step 4\"\tto /tmp/x");
  const std::string time = line.at("time");
  CHECK(time.size() == 24);  // 2024-05-01T12:00:01.123Z
  CHECK(time.back() == 'Z');
}

TEST_CASE("a wrong level, subsystem or format is an error naming it and changes nothing", "[log]") {
  RestoreLoggers restore;
  const auto bad_level = monitor::set_log_level("loud", "comm");
  REQUIRE_FALSE(bad_level.ok());
  CHECK_THAT(bad_level.error().message, Contains("'loud'") && Contains("trace, debug, info"));
  const auto bad_subsystem = monitor::set_log_level("debug", "gpu");
  REQUIRE_FALSE(bad_subsystem.ok());
  CHECK_THAT(bad_subsystem.error().message, Contains("'gpu'") && Contains("comm"));

  const auto bad_spec = monitor::set_log_levels("debug,comm=trace,nosuch=info");
  REQUIRE_FALSE(bad_spec.ok());
  CHECK_THAT(bad_spec.error().message, Contains("'nosuch'"));
  CHECK(monitor::logger("comm")->level() == spdlog::level::info);
  CHECK(monitor::logger("train")->level() == spdlog::level::info);

  REQUIRE(monitor::set_log_levels("warn,comm=trace").ok());
  CHECK(monitor::logger("comm")->level() == spdlog::level::trace);
  CHECK(monitor::logger("train")->level() == spdlog::level::warn);

  CHECK(monitor::log_format_name(monitor::LogFormat::text) == "text");
  CHECK(monitor::log_format_name(monitor::LogFormat::json) == "json");
  const auto unwritable = monitor::log_to_file("/proc/no/such/dir/node-0.log", monitor::LogFormat::text);
  REQUIRE_FALSE(unwritable.ok());
  CHECK_THAT(unwritable.error().message, Contains("/proc/no/such/dir/node-0.log"));
}

TEST_CASE("a process of more than 8 ranks writing a file keeps its ranks' detail lines off the console", "[log]") {
  RestoreLoggers restore;
  TempDir dir;
  const std::string path = dir.file("logs/node-1.log");
  REQUIRE(monitor::log_to_file(path, monitor::LogFormat::text).ok());

  monitor::set_ranks_in_process(8);
  CHECK(monitor::rank_details_on_console());
  const std::string few = console_of(dir, [] { monitor::rank_detail_logger("train")->info("memory of rank 7"); });
  CHECK_THAT(few, Contains("info train: memory of rank 7"));

  monitor::set_ranks_in_process(32);
  CHECK_FALSE(monitor::rank_details_on_console());
  const std::string many = console_of(dir, [] {
    monitor::rank_detail_logger("comm")->info("rank 40 reaches ranks 41, 42");
    monitor::logger("comm")->info("a line of the process");
    REQUIRE(monitor::set_log_level("warn", "train").ok());
    monitor::rank_detail_logger("train")->info("hidden: train is at warn");
  });
  CHECK_THAT(many, Contains("info comm: a line of the process"));
  CHECK_THAT(many, !Contains("reaches"));
  const auto lines = lines_of(path);
  REQUIRE(lines.size() == 3);
  CHECK_THAT(lines[0], Contains("info train: memory of rank 7"));
  CHECK_THAT(lines[1], Contains("info comm: rank 40 reaches ranks 41, 42"));
  CHECK_THAT(lines[2], Contains("info comm: a line of the process"));

  // Without a file, nothing would keep them: they stay on the console.
  REQUIRE(monitor::log_to_file("", monitor::LogFormat::text).ok());
  CHECK(monitor::rank_details_on_console());
  CHECK_THAT(console_of(dir, [] { monitor::rank_detail_logger("comm")->info("rank 41 reaches rank 40"); }),
             Contains("info comm: rank 41 reaches rank 40"));
}
