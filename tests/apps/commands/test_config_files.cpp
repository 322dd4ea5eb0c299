// Every ready config in configs/ runs as its own header says: `troupe train [--workers N] --config
// configs/NAME.toml`, the worker count read from that usage line, for 3 steps of a narrowed model
// (the file's layers, schedule and strategy kept; 64 channels, 32 tokens, batch 2) so that all
// of them run in seconds. The checkpoint file's run is then resumed on another grid.

#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"

using namespace troupe::test;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

std::vector<std::string> config_names() {
  std::vector<std::string> names;
  for (const auto& entry : fs::directory_iterator(TROUPE_SOURCE_DIR "/configs"))
    if (entry.path().extension() == ".toml") names.push_back(entry.path().stem().string());
  std::sort(names.begin(), names.end());
  return names;
}

// Small enough for seconds on one core, whatever the file's preset; nothing about the strategy.
const std::vector<std::string> narrowed{"--train.steps",    "3", "--model.n_embd",     "64", "--model.n_head",
                                        "4",                "--train.seq_len",      "32", "--train.batch_size",
                                        "2",                "--train.threads",      "1",  "--train.val_every",
                                        "0",                "--train.val_batches",  "1",  "--sample.tokens",
                                        "0",                "--train.log_every",    "1"};

}  // namespace

TEST_CASE("every file in configs/ trains as its header says (3 narrowed steps)", "[configs]") {
  // The files the guide and docs/parallelism.md point at must be among them.
  const std::vector<std::string> names = config_names();
  for (const char* wanted : {"data-parallel", "zero2", "pipeline-1f1b", "pipeline-interleaved", "checkpoint-recovery"})
    CHECK(std::find(names.begin(), names.end(), wanted) != names.end());

  const std::string name = GENERATE_COPY(from_range(names));
  const std::string path = TROUPE_SOURCE_DIR "/configs/" + name + ".toml";
  const std::string text = file_text(path);
  std::smatch usage;
  INFO(name << ".toml");
  REQUIRE(std::regex_search(text, usage, std::regex("#\\s+troupe train (--workers (\\d+) )?--config configs/" + name +
                                                        "\\.toml")));  // a header line says how to run it
  std::vector<std::string> args{"train"};
  if (usage[2].matched) args.insert(args.end(), {"--workers", usage[2].str()});
  args.insert(args.end(), {"--config", path});
  args.insert(args.end(), narrowed.begin(), narrowed.end());

  TempDir dir;
  const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(90));
  INFO("stdout: " << r.out);
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK(std::regex_search(r.out, std::regex("step +3/3 \\| loss")));

  if (text.find("[checkpoint]") != std::string::npos) {
    // Its checkpoints land where the file says, and a run on another grid (1 replica of 2
    // pipeline stages, the same global batch of 4) resumes from them.
    REQUIRE(fs::is_directory(dir.path() / "checkpoints" / "step-0000003"));
    std::vector<std::string> again{"train", "--workers", "2", "--config", path};
    again.insert(again.end(), narrowed.begin(), narrowed.end());
    again.insert(again.end(), {"--train.steps", "5", "--pipeline.stages", "2", "--pipeline.microbatches", "2", "--resume"});
    const ProcessResult resumed = run_troupe(dir, again, std::chrono::seconds(90));
    INFO("resumed stdout: " << resumed.out);
    INFO("resumed stderr: " << resumed.err);
    REQUIRE(resumed.exit_code == 0);
    CHECK_THAT(resumed.out, Contains("resumed from") && Contains("step-0000003"));
    CHECK(fs::is_directory(dir.path() / "checkpoints" / "step-0000005"));
  }
}
