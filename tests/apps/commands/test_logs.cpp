// Logs of real troupe processes (docs/logging.md): each node process of a job writes its own file
// under monitor.log_dir, every line naming the job, the rank and the role; JSON lines parse; the
// level spec decides what is written per subsystem; bad log settings are refused as bad input.

#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <sstream>

#include <nlohmann/json.hpp>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;

namespace {

const std::vector<std::string> tiny_two_nodes{"train", "--workers",           "2", "--model.preset",   "tiny",
                                              "--train.steps", "3", "--train.val_batches", "1", "--sample.tokens",
                                              "0", "--train.threads", "1"};

std::vector<std::string> lines_of(const std::filesystem::path& path) {
  std::istringstream in(file_text(path));
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// The one folder under `logs`: the job's label.
std::filesystem::path job_folder(const std::filesystem::path& logs) {
  std::vector<std::filesystem::path> folders;
  for (const auto& entry : std::filesystem::directory_iterator(logs)) folders.push_back(entry.path());
  REQUIRE(folders.size() == 1);
  CHECK(std::regex_match(folders.front().filename().string(), std::regex("[0-9a-f]{8}")));
  return folders.front();
}

ProcessResult run_two_nodes(const TempDir& dir, std::vector<std::string> extra) {
  std::vector<std::string> args = tiny_two_nodes;
  args.insert(args.end(), extra.begin(), extra.end());
  ProcessResult result = run_troupe(dir, args, std::chrono::seconds(120));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  return result;
}

}  // namespace

TEST_CASE("each node of a 2-node job writes its own log file, every line with job, rank and role", "[logs][dp]") {
  TempDir dir;
  const ProcessResult run = run_two_nodes(dir, {"--monitor.log_dir", dir.file("logs")});
  const std::filesystem::path job = job_folder(dir.file("logs"));
  const std::string label = job.filename().string();
  CHECK_THAT(run.out, Contains("logs to " + (job / "node-0.log").string() + " (text)"));
  // The file begins with the process: lines logged before it was opened are in it too.
  CHECK_THAT(file_text(job / "node-1.log"), Contains("info monitor: metrics on http://127.0.0.1:"));
  for (int node : {0, 1}) {
    INFO("node " << node);
    const auto lines = lines_of(job / ("node-" + std::to_string(node) + ".log"));
    REQUIRE(lines.size() >= 2);
    const std::regex prefix("\\d\\d:\\d\\d:\\d\\d\\.\\d{3} \\[" + label + " r" + std::to_string(node) +
                            " node\\] (trace|debug|info|warning|error|critical) [a-z]+: .*");
    for (const std::string& line : lines) {
      INFO(line);
      CHECK(std::regex_match(line, prefix));
    }
  }
  // Rank 0 reports the run; its progress lines are in its own file, not in node 1's.
  CHECK_THAT(file_text(job / "node-0.log"), Contains("info train: done: 3 steps"));
  CHECK_THAT(file_text(job / "node-1.log"), !Contains("done: 3 steps"));
}

TEST_CASE("JSON log lines parse and carry time, level, job, rank, role, subsystem and msg", "[logs][dp]") {
  TempDir dir;
  run_two_nodes(dir, {"--monitor.log_dir", dir.file("logs"), "--monitor.log_format", "json"});
  const std::filesystem::path job = job_folder(dir.file("logs"));
  for (int node : {0, 1}) {
    INFO("node " << node);
    const auto lines = lines_of(job / ("node-" + std::to_string(node) + ".log"));
    REQUIRE(lines.size() >= 2);
    for (const std::string& line : lines) {
      INFO(line);
      const auto json = nlohmann::json::parse(line);
      CHECK(json.at("job") == job.filename().string());
      CHECK(json.at("rank") == node);
      CHECK(json.at("role") == "node");
      CHECK(!json.at("time").get<std::string>().empty());
      CHECK(!json.at("level").get<std::string>().empty());
      CHECK(!json.at("subsystem").get<std::string>().empty());
      CHECK(json.contains("msg"));
    }
  }
}

TEST_CASE("monitor.log_level sets a level for all and then per subsystem", "[logs][dp]") {
  TempDir dir;
  const ProcessResult run =
      run_two_nodes(dir, {"--monitor.log_dir", dir.file("logs"), "--monitor.log_level", "warn,monitor=info"});
  const std::string node0 = file_text(job_folder(dir.file("logs")) / "node-0.log");
  CHECK_THAT(node0, Contains("info monitor: logs to"));
  CHECK_THAT(node0, !Contains("info train:"));
  CHECK_THAT(run.out, !Contains("info train:"));
}

TEST_CASE("the log file goes next to the checkpoints by default, and nowhere with an empty log_dir", "[logs]") {
  TempDir dir;
  const std::vector<std::string> tiny{"train", "--model.preset", "tiny", "--train.steps", "1", "--train.val_batches",
                                      "1", "--sample.tokens", "0", "--monitor.metrics_port", "-1"};
  std::vector<std::string> with_checkpoints = tiny;
  with_checkpoints.insert(with_checkpoints.end(), {"--checkpoint.dir", "ck"});
  const ProcessResult saved = run_troupe(dir, with_checkpoints);
  INFO("stdout: " << saved.out << "\nstderr: " << saved.err);
  REQUIRE(saved.exit_code == 0);
  CHECK_THAT(file_text(dir.path() / "ck/logs/local/node-0.log"), Contains("[local r0 trainer] info train: done"));

  std::vector<std::string> no_file = tiny;
  no_file.insert(no_file.end(), {"--monitor.log_dir", ""});
  const ProcessResult quiet = run_troupe(dir, no_file);
  REQUIRE(quiet.exit_code == 0);
  CHECK_THAT(quiet.out, !Contains("logs to"));
  CHECK(!std::filesystem::exists(dir.path() / "troupe-logs"));
}

TEST_CASE("a bad log level, subsystem, format or folder is refused with one line", "[logs][cli]") {
  TempDir dir;
  check_rejected_in(dir, {"train", "--monitor.log_level", "loud"}, "monitor.log_level: log levels 'loud': unknown log level 'loud'");
  check_rejected_in(dir, {"train", "--monitor.log_level", "info,gpu=debug"}, "unknown log subsystem 'gpu'");
  check_rejected_in(dir, {"train", "--monitor.log_format", "xml"},
                    "monitor.log_format: expected text or json, got 'xml'");
  // The folder is found wrong only once the rest of start-up has passed, after the metrics line.
  dir.write("file", "not a folder");
  const ProcessResult bad_dir = run_troupe(dir, {"train", "--model.preset", "tiny", "--monitor.metrics_port", "-1",
                                                 "--monitor.log_dir", dir.file("file")});
  CHECK(bad_dir.exit_code == 2);
  CHECK_THAT(bad_dir.err, Catch::StartsWith("troupe: error: monitor.log_dir: cannot write the log file " +
                                            dir.file("file") + "/local/node-0.log: "));
  CHECK(std::count(bad_dir.err.begin(), bad_dir.err.end(), '\n') == 1);
}
