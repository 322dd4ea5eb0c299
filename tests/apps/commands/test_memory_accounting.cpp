// The memory ledger against the kernel (docs/parallelism.md, "Memory by kind"): for tiny, small
// and a GPT-2-shaped model (GPT-2's width, heads and vocabulary, two blocks), in one process,
// data-parallel (ZeRO 0 to 3) and as a two-stage 1F1B pipeline, every rank's accounted peak
// (runtime plus every tensor and comm buffer, the sum's own peak) is within 10 % of the peak
// resident set its process measured (VmHWM), as the rank's "memory at end" line reports both.

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

namespace {

double mib(const std::string& number, const std::string& unit) {
  const double value = std::stod(number);
  return unit == "GiB" ? value * 1024 : unit == "KiB" ? value / 1024 : unit == "B" ? value / (1 << 20) : value;
}

struct RankMemory {
  double accounted_peak_mib = 0;
  double peak_resident_mib = 0;
};

// Trains `model` for 3 steps in `layout` and reads every rank's end-of-run line.
std::map<int, RankMemory> run_and_read(const std::vector<std::string>& model, const std::vector<std::string>& layout,
                                       int ranks) {
  TempDir dir;
  std::vector<std::string> argv{TROUPE_BINARY_DIR "/troupe", "train", "--train.steps",   "3", "--train.val_every", "0",
                                "--train.val_batches",       "1",     "--sample.tokens", "0", "--train.threads",   "1"};
  argv.insert(argv.end(), model.begin(), model.end());
  argv.insert(argv.end(), layout.begin(), layout.end());
  const ProcessResult r = run_process(argv, dir.path().string(), std::chrono::seconds(240));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  const std::regex end_line(
      "memory at end of rank (\\d+): .*; total [^,]+, peak ([0-9.]+) (B|KiB|MiB|GiB); resident [^,]+, "
      "peak resident ([0-9.]+) (B|KiB|MiB|GiB)");
  std::map<int, RankMemory> found;
  for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), end_line); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    found[std::stoi(m[1].str())] = {mib(m[2].str(), m[3].str()), mib(m[4].str(), m[5].str())};
  }
  CHECK(static_cast<int>(found.size()) == ranks);
  const std::regex start_line("memory at start of rank \\d+: .*parameters .*gradients .*optimizer_state .*activations");
  CHECK(std::distance(std::sregex_iterator(r.out.begin(), r.out.end(), start_line), std::sregex_iterator()) == ranks);
  return found;
}

// Every rank of every layout: the accounted peak within 10 % of the measured one.
void check_layouts(const std::vector<std::string>& model, const std::vector<std::string>& zero_stages) {
  std::vector<std::pair<std::vector<std::string>, int>> layouts{
      {{}, 1},
      {{"--workers", "2", "--pipeline.stages", "2", "--pipeline.schedule", "1f1b", "--pipeline.microbatches", "4"}, 2}};
  for (const std::string& zero : zero_stages) layouts.push_back({{"--workers", "2", "--train.zero", zero}, 2});
  for (const auto& [layout, ranks] : layouts) {
    std::string text;
    for (const std::string& word : layout) text += word + " ";
    for (const auto& [rank, memory] : run_and_read(model, layout, ranks)) {
      INFO("layout: " << text << "rank " << rank << ": accounted peak " << memory.accounted_peak_mib
                      << " MiB, peak resident " << memory.peak_resident_mib << " MiB");
      CHECK(memory.peak_resident_mib > 0);
      CHECK(std::abs(memory.accounted_peak_mib - memory.peak_resident_mib) <= 0.10 * memory.peak_resident_mib);
    }
  }
}

}  // namespace

TEST_CASE("tiny: the accounted peak is within 10% of the peak resident set, 1 process, dp 2, pp 2",
          "[memory][dp][pipeline]") {
  check_layouts({"--model.preset", "tiny", "--train.batch_size", "4", "--train.seq_len", "64"}, {"0"});
}

TEST_CASE("small: the accounted peak is within 10% of the peak resident set, 1 process, dp 2 ZeRO 1 and 3, pp 2",
          "[memory][dp][pipeline]") {
  check_layouts({"--model.preset", "small", "--train.batch_size", "4", "--train.seq_len", "128"}, {"1", "3"});
}

TEST_CASE(
    "GPT-2-shaped: the accounted peak is within 10% of the peak resident set, 1 process, dp 2 ZeRO 2 and 3, "
    "pp 2",
    "[memory][dp][pipeline][slow]") {
  check_layouts({"--model.preset", "gpt2", "--model.n_layer", "2", "--train.batch_size", "1", "--train.seq_len", "128"},
                {"2", "3"});
}
