// Pins the Chrome trace JSON of docs/formats/chrome-trace.md (monitor/trace.hpp) and the
// `troupe schedule` command that writes one: its report, its trace and how it rejects bad input.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "monitor/trace.hpp"
#include "apps/run_troupe.hpp"
#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

using namespace troupe;
using namespace troupe::test;
using Catch::Contains;
using Catch::StartsWith;
using nlohmann::json;

namespace {

json read_json(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream text;
  text << in.rdbuf();
  return json::parse(text.str());  // throws, failing the test, on anything that is not JSON
}

std::vector<json> events_with(const json& document, const std::string& ph) {
  std::vector<json> found;
  for (const json& event : document.at("traceEvents"))
    if (event.at("ph") == ph) found.push_back(event);
  return found;
}

void check_schedule_rejected(const std::vector<std::string>& args, const std::string& what) {
  TempDir dir;
  check_rejected_in(dir, args, what);
}

}  // namespace

TEST_CASE("trace writer emits the documented Chrome trace fields", "[trace]") {
  monitor::TraceRecorder recorder;
  recorder.name_track({0, 1}, "stage 1");  // named out of order: the document sorts them
  recorder.name_track({0, 0}, "stage 0");
  recorder.name_process(0, "pipeline");
  recorder.add_complete({0, 0}, "F3", "forward", 3000.0, 1000.0, {{"microbatch", "3"}, {"chunk", "0"}});
  recorder.add_complete({0, 1}, "send_act", "transfer", 4500.5, 0.0);

  TempDir dir;
  const std::string path = dir.file("t.json");
  const Status written = monitor::write_trace(recorder, path);
  REQUIRE(written.ok());
  const json document = read_json(path);

  CHECK(document.at("displayTimeUnit") == "ms");
  const auto metadata = events_with(document, "M");
  REQUIRE(metadata.size() == 3);
  CHECK(metadata[0] == json::parse(R"({"ph":"M","name":"process_name","pid":0,"tid":0,"args":{"name":"pipeline"}})"));
  CHECK(metadata[1] == json::parse(R"({"ph":"M","name":"thread_name","pid":0,"tid":0,"args":{"name":"stage 0"}})"));
  CHECK(metadata[2] == json::parse(R"({"ph":"M","name":"thread_name","pid":0,"tid":1,"args":{"name":"stage 1"}})"));

  const auto complete = events_with(document, "X");
  REQUIRE(complete.size() == 2);
  CHECK(complete[0] == json::parse(R"({"ph":"X","name":"F3","cat":"forward","pid":0,"tid":0,"ts":3000.0,
                                       "dur":1000.0,"args":{"microbatch":"3","chunk":"0"}})"));
  CHECK(complete[1].at("ts").get<double>() == 4500.5);
  CHECK(complete[1].at("dur").get<double>() == 0.0);
  CHECK(complete[1].at("args") == json::object());
  // The metadata comes first, then the events in the order they were added.
  CHECK(document.at("traceEvents").size() == 5);
  CHECK(document.at("traceEvents")[3].at("name") == "F3");
}

TEST_CASE("trace recorder takes events from several threads", "[trace]") {
  monitor::TraceRecorder recorder;
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&recorder, t] {
      recorder.name_track({0, t}, "stage " + std::to_string(t));
      for (int i = 0; i < 250; ++i) recorder.add_complete({0, t}, "op", "compute", i, 1);
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(recorder.events().size() == 1000);
  const json document = json::parse(recorder.to_json());
  CHECK(events_with(document, "M").size() == 4);
  CHECK(events_with(document, "X").size() == 1000);
}

TEST_CASE("trace writer names the path it cannot write", "[trace]") {
  monitor::TraceRecorder recorder;
  TempDir dir;
  const std::string path = dir.file("no-such-dir/t.json");
  const Status written = monitor::write_trace(recorder, path);
  REQUIRE(!written.ok());
  CHECK_THAT(written.error().message, StartsWith("cannot write trace file '" + path + "': "));
  CHECK_THAT(written.error().message, Contains("No such file or directory"));
}

TEST_CASE("troupe schedule reports 1f1b p=4 m=8 and writes its trace", "[trace]") {
  TempDir dir;
  const ProcessResult result =
      run_troupe(dir, {"schedule", "--kind", "1f1b", "--stages", "4", "--microbatches", "8", "--trace", "t.json"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);
  CHECK(result.err.empty());
  CHECK_THAT(result.out, StartsWith("1f1b p=4 m=8 v=1: 4 stages, 8 micro-batches, 1 chunk per stage\n"));
  CHECK_THAT(result.out, Contains("makespan  33 cost units"));
  CHECK_THAT(result.out, Contains("bubble    0.273 simulated; closed form (p-1)/(m+p-1) = 3/11 = 0.273\n"));
  CHECK_THAT(result.out, Contains("1 cost unit = 1 ms"));
  // Peak stashed activations of 1F1B: p - s.
  CHECK_THAT(result.out, Contains("    0            34             4    24\n"));
  CHECK_THAT(result.out, Contains("    3            34             1    24\n"));

  const json document = read_json((dir.path() / "t.json").string());
  std::set<int> tracks;
  for (const json& meta : events_with(document, "M")) {
    if (meta.at("name") != "thread_name") continue;
    tracks.insert(meta.at("tid").get<int>());
    CHECK(meta.at("args").at("name") == "stage " + std::to_string(meta.at("tid").get<int>()));
  }
  CHECK(tracks == std::set<int>{0, 1, 2, 3});

  std::map<std::string, int> by_category;
  double last_end_us = 0;
  for (const json& event : events_with(document, "X")) {
    ++by_category[event.at("cat").get<std::string>()];
    last_end_us = std::max(last_end_us, event.at("ts").get<double>() + event.at("dur").get<double>());
  }
  CHECK(by_category["forward"] == 4 * 8);
  CHECK(by_category["backward"] == 4 * 8);
  CHECK(by_category["transfer"] == 2 * (2 * 8 * 3));  // a send and a recv per message, 2m(p-1) messages
  CHECK(by_category["step"] == 4 * 2);                // reduce_grads, optimizer_step per stage
  CHECK(last_end_us == 33000.0);                      // the makespan, 1 cost unit = 1 ms

  // Stage 0's first event: forward of micro-batch 0 over the first cost unit.
  const auto first = std::find_if(document.at("traceEvents").begin(), document.at("traceEvents").end(),
                                  [](const json& e) { return e.at("ph") == "X" && e.at("tid") == 0; });
  REQUIRE(first != document.at("traceEvents").end());
  CHECK(first->at("name") == "F0");
  CHECK(first->at("ts").get<double>() == 0.0);
  CHECK(first->at("dur").get<double>() == 1000.0);
  CHECK(first->at("args").at("microbatch") == "0");
}

TEST_CASE("troupe schedule interleaved prints its formula and streams", "[trace]") {
  TempDir dir;
  const ProcessResult result = run_troupe(dir, {"schedule", "--kind", "interleaved", "--stages", "4", "--microbatches",
                                               "8", "--virtual-stages", "2", "--print"});
  INFO("stderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("bubble    0.158 simulated; closed form (p-1)/(v*m+p-1) = 3/19 = 0.158\n"));
  CHECK_THAT(result.out, Contains("\ninterleaved p=4 m=8 v=2\nstage 0:\n   0  forward mb 0 chunk 0\n"));
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("troupe schedule --stage-speeds: a stage at half speed is busy twice as long and paces the pipeline",
          "[trace][speed]") {
  TempDir dir;
  const ProcessResult result = run_troupe(
      dir, {"schedule", "--kind", "1f1b", "--stages", "2", "--microbatches", "4", "--stage-speeds", "1,0.5"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("latency 0; at stage speeds 1,0.5 (a stage's costs over its speed)\n"));
  // Stage 0 does 4 forwards and 4 backwards (12 units); stage 1 the same at half speed.
  CHECK_THAT(result.out, Contains("    0            18             2    12\n"));
  CHECK_THAT(result.out, Contains("    1            18             1    24\n"));
  // Stage 1 never waits once it has its first input: 1 + 24, then stage 0's last backward, 2.
  CHECK_THAT(result.out, Contains("makespan  27 cost units"));
  CHECK_THAT(result.out, Contains("(at equal speeds)\n"));
  check_schedule_rejected(
      {"schedule", "--kind", "1f1b", "--stages", "2", "--microbatches", "4", "--stage-speeds", "1,0.5,1"},
      "--stage-speeds 1,0.5,1: 3 speeds for 2 stages (one a stage)");
  check_schedule_rejected(
      {"schedule", "--kind", "1f1b", "--stages", "2", "--microbatches", "4", "--stage-speeds", "1,0"},
      "--stage-speeds must be positive, got 0");
  check_schedule_rejected(
      {"schedule", "--kind", "1f1b", "--stages", "2", "--microbatches", "4", "--stage-speeds", "1,x"},
      "--stage-speeds: 'x' in '1,x' is not a number (write one speed a stage, comma-separated: 1,0.5)");
}

TEST_CASE("troupe schedule --cost-spread adds the bubble when every op's cost varies", "[trace][speed]") {
  TempDir dir;
  const ProcessResult result = run_troupe(dir, {"schedule", "--kind", "1f1b", "--stages", "2", "--microbatches", "8",
                                                "--cost-spread", "0.1", "--trials", "50"});
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("bubble    0.111 simulated"));
  std::smatch line;
  REQUIRE(std::regex_search(
      result.out, line,
      std::regex(R"(\n +([0-9.]+) mean over 50 simulations with each op's cost varying by a spread of 0.1 )"
                 R"(\(log-normal\), ([0-9.]+) to ([0-9.]+) in 90 % of them\n)")));
  const double mean = std::stod(line[1].str()), low = std::stod(line[2].str()), high = std::stod(line[3].str());
  CHECK(mean > 0.111);
  CHECK(low <= mean);
  CHECK(mean <= high);
  check_schedule_rejected(
      {"schedule", "--kind", "1f1b", "--stages", "2", "--microbatches", "8", "--cost-spread", "-0.1"},
      "--cost-spread must be between 0 and 3, got -0.1");
  check_schedule_rejected(
      {"schedule", "--kind", "1f1b", "--stages", "2", "--microbatches", "8", "--cost-spread", "0.1", "--trials", "0"},
      "--trials must be between 1 and 100000, got 0");
  check_schedule_rejected({"schedule", "--kind", "1f1b", "--stages", "2", "--microbatches", "8", "--trials", "10"},
                          "--trials requires --cost-spread");
}

TEST_CASE("troupe schedule rejects bad input in one line naming the option", "[trace]") {
  check_schedule_rejected({"schedule", "--kind", "1f1b", "--stages", "0", "--microbatches", "8"},
                          "--stages must be between 1 and 256, got 0");
  check_schedule_rejected({"schedule", "--kind", "zigzag", "--stages", "4", "--microbatches", "8"},
                          "--kind: expected gpipe, 1f1b, interleaved, zb-h1 or zb-v, got 'zigzag'");
  check_schedule_rejected(
      {"schedule", "--kind", "interleaved", "--stages", "4", "--microbatches", "6", "--virtual-stages", "2"},
      "--microbatches 6: pipeline schedule interleaved p=4 m=6 v=2: interleaving needs m a multiple of p");
  check_schedule_rejected(
      {"schedule", "--kind", "1f1b", "--stages", "4", "--microbatches", "8", "--virtual-stages", "2"},
      "--virtual-stages 2: ");
  check_schedule_rejected({"schedule", "--kind", "gpipe", "--stages", "4", "--microbatches", "8", "--latency", "-1"},
                          "--latency must be zero or positive, got -1");
  check_schedule_rejected(
      {"schedule", "--kind", "zb-h1", "--stages", "2", "--microbatches", "8", "--weight-share", "1.5"},
      "--weight-share must be between 0 and 1, got 1.5");
  check_schedule_rejected({"schedule", "--kind", "gpipe", "--stages", "4", "--microbatches", "8", "--stagez", "2"},
                          "unknown option --stagez");
}

TEST_CASE("troupe schedule fails with the trace path it cannot write", "[trace]") {
  TempDir dir;
  const ProcessResult result = run_troupe(
      dir, {"schedule", "--kind", "gpipe", "--stages", "2", "--microbatches", "2", "--trace", "missing/t.json"});
  CHECK(result.exit_code == 1);
  CHECK(result.err == "troupe: error: cannot write trace file 'missing/t.json': No such file or directory\n");
}

TEST_CASE("a trace document read back merges into another recorder unchanged", "[trace]") {
  monitor::TraceRecorder rank1;
  rank1.name_process(1, "replica 1");
  rank1.name_track({1, 0}, "stage 0");
  rank1.add_complete({1, 0}, "F3", "forward", 12.5, 100, {{"microbatch", "3"}});
  monitor::TraceRecorder merged;
  merged.name_track({0, 0}, "stage 0");
  REQUIRE(merged.add_document(rank1.to_json()).ok());
  const auto events = merged.events();
  REQUIRE(events.size() == 1);
  CHECK((events[0].track == monitor::TraceTrack{1, 0} && events[0].name == "F3" && events[0].category == "forward" &&
         events[0].start_us == 12.5 && events[0].duration_us == 100));
  CHECK(events[0].args == monitor::TraceArgs{{"microbatch", "3"}});
  const std::string text = merged.to_json();
  CHECK_THAT(text, Contains("\"replica 1\"") && Contains("{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":1"));
  CHECK_FALSE(merged.add_document("{\"nothing\":1}").ok());
  CHECK_FALSE(merged.add_document("not json").ok());
}
