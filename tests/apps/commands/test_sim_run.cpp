// train.backend sim as a user runs it (docs/scale.md): many ranks in a few node processes over
// the real runtime, the schedule's order the real backend's, and the sim.* keys' bad input refused
// with one line.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "apps/run_troupe.hpp"
#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;

namespace {

// Every stage's forward, backward, transfer and step events of a pipeline trace, in time order:
// (track, name) pairs. Waits are left out: how long a stage waits is timing, not order.
std::vector<std::pair<int, std::string>> ordered_ops(const std::string& path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  const nlohmann::json doc = nlohmann::json::parse(in);
  std::map<int, std::vector<std::pair<double, std::string>>> by_track;
  for (const auto& e : doc["traceEvents"]) {
    if (e["ph"] != "X") continue;
    const std::string category = e["cat"];
    if (category != "forward" && category != "backward" && category != "transfer" && category != "step") continue;
    by_track[e["tid"].get<int>()].emplace_back(e["ts"].get<double>(), e["name"].get<std::string>());
  }
  std::vector<std::pair<int, std::string>> ops;
  for (auto& [track, events] : by_track) {
    std::stable_sort(events.begin(), events.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (const auto& [ts, name] : events) ops.emplace_back(track, name);
  }
  return ops;
}

}  // namespace

TEST_CASE("sim.* keys with a real backend, a rate of zero, and more sim ranks than memory allows are each one line",
          "[sim][cli]") {
  TempDir dir;
  check_rejected_in(dir, {"train", "--model.preset", "tiny", "--sim.flops", "1e12"},
                    "sim.flops is set, but train.backend is 'cpu': the sim.* keys describe the device of "
                    "train.backend sim");
  check_rejected_in(dir,
                    {"train", "--model.preset", "tiny", "--train.backend", "sim", "--sim.link_bandwidth_inter", "0"},
                    "sim.link_bandwidth_inter must be positive, got 0");
  check_rejected_in(dir, {"train", "--model.preset", "tiny", "--train.backend", "sim", "--sim.memory_bandwidth", "0"},
                    "sim.memory_bandwidth must be positive, got 0");
  check_rejected_in(dir,
                    {"train", "--model.preset", "tiny", "--train.backend", "sim", "--sim.link_latency_intra", "-1"},
                    "sim.link_latency_intra must not be negative, got -1");
  // The per-core cap does not hold sim ranks back; the memory check still does.
  const std::string hosts = dir.write("hosts", "localhost slots=65536\n");
  const ProcessResult r =
      check_rejected_in(dir, {"launch", "--hostfile", hosts, "--model.preset", "tiny", "--train.backend", "sim"},
                        "65536 ranks: a rank needs about");
  CHECK_THAT(r.err, !Contains("CPU core"));
}

TEST_CASE("a sim pipeline on tiny runs every stage's forwards, backwards, sends and steps in the cpu backend's order",
          "[sim][pipeline][trace]") {
  TempDir dir;
  std::map<std::string, std::vector<std::pair<int, std::string>>> ops;
  for (const std::string backend : {"cpu", "sim"}) {
    const std::string path = (dir.path() / (backend + ".json")).string();
    const ProcessResult r = run_troupe(dir,
                                       with({"train", "--workers", "2", "--pipeline.stages", "2", "--pipeline.schedule",
                                             "1f1b", "--train.backend", backend, "--pipeline.trace", path},
                                            tiny_steps(3)),
                                       std::chrono::seconds(120));
    INFO(backend << " stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    ops[backend] = ordered_ops(path);
  }
  // 3 steps × 4 micro-batches of forward, backward and a send, and 2 step events, on each stage.
  CHECK(ops["cpu"].size() == 2 * 3 * (4 * 3 + 2));
  CHECK(ops["sim"] == ops["cpu"]);
}

TEST_CASE("a sim run prints no sample at its end: its model computes no logits to sample from", "[sim]") {
  TempDir dir;
  const ProcessResult r = run_troupe(
      dir, with(with({"train", "--workers", "1", "--train.backend", "sim"}, tiny_steps(2)), {"--sample.tokens", "20"}),
      std::chrono::seconds(120));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out + r.err, Contains("no sample: the sim backend computes no logits to sample from"));
  CHECK_FALSE(Contains("sample (20 tokens").match(r.out + r.err));
}

// About 6 s on a 2-core VM with nothing else running. Its node processes' ranks are idle-class
// threads (actors/idle_class.hpp): CPU-bound processes of the normal class beside it starve them
// (six busy loops made the undisturbed run alone take 143 s), so the test wants the machine to
// itself, as CI's serial ctest gives it.
TEST_CASE("64 sim ranks in 4 node processes join, train, save a checkpoint, and recover a killed node in place",
          "[sim][drill]") {
  TempDir dir;
  const auto started = std::chrono::steady_clock::now();
  const ProcessResult r = run_troupe(
      dir,
      {"drill", "kill-node", "--keep", "--dir", (dir.path() / "drill").string(), "--workers", "4", "--slots", "16",
       "--at-step", "3", "--model.preset", "tiny", "--train.backend", "sim", "--train.steps", "10",
       "--train.val_batches", "1", "--train.val_every", "0", "--train.batch_size", "1", "--checkpoint.every", "2",
       // tiny's step at an A100's rate is microseconds of modelled time, so the ranks would finish
       // before the kill lands: a device of 5 GFLOP/s makes a step about 0.2 s, and the seven
       // steps after the kill's step leave the drill more than a second to land it.
       "--sim.flops", "5e9"},
      std::chrono::seconds(240));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  std::printf("64 sim ranks, undisturbed and drilled: %.1f s\n", seconds);
  REQUIRE(!r.timed_out);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("verdict: PASS") && Contains("lost node 1") && Contains("steps lost: 0\n") &&
                        Contains("recovered from a surviving replica's memory: yes (in place, over the data plane)") &&
                        Contains("survivors kept their processes: yes"));
  // The late messages of the abandoned step, still in UCX's queues when the survivors' engines go,
  // are dropped quietly: UCX warned once a message (36 lines in this drill) before.
  const std::string drilled = file_text((dir.path() / "drill" / "drilled.log").string());
  CHECK_THAT(drilled, Contains("job finished"));
  CHECK_THAT(drilled, !Contains("UCX  WARN"));
}
