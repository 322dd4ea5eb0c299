// Runs the built troupe binary as a user would, in an empty directory, and checks how it rejects
// bad input: exit code 2, exactly one line on stderr starting "troupe: error:" and naming the
// input, nothing on stdout, and no file left behind. None of these reaches training: the input
// is rejected first.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;
using Catch::StartsWith;

namespace {

// Runs troupe with args in a fresh directory and checks the single-line rejection naming what.
// ... and that the line ends the output and nothing was written.
void check_rejected(const std::vector<std::string>& args, const std::string& what) {
  TempDir dir;
  const ProcessResult result = check_rejected_in(dir, args, what);
  REQUIRE(!result.err.empty());
  CHECK(result.err.back() == '\n');
  CHECK(std::filesystem::is_empty(dir.path()));
}

// Runs `env ASSIGNMENT troupe ARGS...` in a fresh directory and checks that the variable is
// refused as bad input: exit code 2, nothing on stdout, stderr exactly the one line, no file.
void check_environment_rejected(const std::string& assignment, const std::vector<std::string>& args,
                                const std::string& line) {
  TempDir dir;
  std::vector<std::string> argv{"/usr/bin/env", assignment, TROUPE_BINARY_DIR "/troupe"};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult result = run_process(argv, dir.path().string(), std::chrono::seconds(20));
  INFO(assignment << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  CHECK(result.exit_code == 2);
  CHECK(result.out.empty());
  CHECK(result.err == "troupe: error: " + line + "\n");
  CHECK(std::filesystem::is_empty(dir.path()));
}

}  // namespace

TEST_CASE("troupe node rejects an invalid variable in one line naming it and its value", "[cli][environment]") {
  const std::vector<std::string> node{"node",   "--config",     TROUPE_SOURCE_DIR "/configs/tiny.toml",
                                      "--join", "127.0.0.1:1",  "--token",
                                      "t",      "--node-index", "0"};
  check_environment_rejected("RANK=abc", node, "environment variable RANK: expected an integer >= 0, got 'abc'");
  check_environment_rejected("RANK=-1", node, "environment variable RANK: expected an integer >= 0, got '-1'");
  check_environment_rejected("WORLD_SIZE=0", node,
                             "environment variable WORLD_SIZE: expected an integer >= 1, got '0'");
  check_environment_rejected("TROUPE_SLOTS=x", node,
                             "environment variable TROUPE_SLOTS: expected an integer >= 1, got 'x'");
  check_environment_rejected("TROUPE_RESTARTS=restarts=x", node, "TROUPE_RESTARTS: 'restarts=x' is not NAME=COUNT");
  check_environment_rejected("TROUPE_JOIN=nohost", {"node", "--config", TROUPE_SOURCE_DIR "/configs/tiny.toml"},
                             "environment variable TROUPE_JOIN: expected HOST:PORT, got 'nohost'");
}

TEST_CASE("a job refuses an invalid comm knob or drill variable before it starts", "[cli][environment]") {
  const std::vector<std::string> train{"train", "--config", TROUPE_SOURCE_DIR "/configs/tiny.toml"};
  std::vector<std::string> two_workers = train;
  two_workers.insert(two_workers.end(), {"--workers", "2"});
  check_environment_rejected("TROUPE_COMM_WINDOW=four", two_workers,
                             "environment variable TROUPE_COMM_WINDOW: expected an integer >= 0, got 'four'");
  check_environment_rejected("TROUPE_COMM_CHUNK_BYTES=-1", train,
                             "environment variable TROUPE_COMM_CHUNK_BYTES: expected an integer >= 0, got '-1'");
  check_environment_rejected(
      "TROUPE_DRILL_THROW_AT=1", two_workers,
      "environment variable TROUPE_DRILL_THROW_AT: expected RANK:STEP, two integers >= 0, got '1'");
}

TEST_CASE("troupe rejects an unknown flag in one line", "[cli]") {
  check_rejected({"train", "--train.stepz", "5"}, "unknown option --train.stepz (did you mean --train.steps?)");
}

TEST_CASE("troupe rejects an unknown config key in one line", "[cli]") {
  TempDir config_dir;
  const auto path = config_dir.write("job.toml", "[train]\nsteps = 5\nbogus_key = 1\n");
  check_rejected({"train", "--config", path}, path + ":3: unknown key 'train.bogus_key'");
}

TEST_CASE("troupe rejects n_embd not divisible by n_head", "[cli]") {
  check_rejected({"train", "--model.n_embd", "100", "--model.n_head", "3"},
                 "model.n_embd (100) must be divisible by model.n_head (3)");
}

TEST_CASE("troupe rejects negative steps", "[cli]") {
  check_rejected({"train", "--train.steps", "-5"}, "train.steps must be positive, got -5");
}

TEST_CASE("troupe rejects seq_len beyond the block size", "[cli]") {
  check_rejected({"train", "--train.seq_len=100000"}, "train.seq_len 100000 exceeds model.block_size 256");
}

TEST_CASE("troupe rejects a missing config file", "[cli]") {
  check_rejected({"train", "--config", "no-such-file.toml"}, "cannot read config file 'no-such-file.toml'");
}

TEST_CASE("troupe rejects a malformed value and an unknown command", "[cli]") {
  check_rejected({"train", "--train.lr", "fast"}, "train.lr: expected a number, got 'fast'");
  check_rejected({"trian"}, "unknown command 'trian' (did you mean train?)");
  check_rejected({},
                 "'troupe' needs a command (train, launch, node, bench, schedule, plan, drill, import, export, "
                 "tokenize, generate, shell)");
  check_rejected(
      {"bench"},
      "'troupe bench' needs a command (compute, allreduce, dp, compress, diloco, zero3, tp, cp, moe, pipeline, "
      "checkpoint, gpu, scale, sim-check, tokenize, balance)");
  check_rejected({"--bogus", "train"}, "unknown option --bogus");
  check_rejected({"bench", "compute", "--models", "tiny,huge"}, "'huge' is not a preset");
}

TEST_CASE("launch and node refuse numeric flags out of range, before any node starts", "[cli]") {
  check_rejected({"launch", "--hostfile", "none.txt", "--port", "70000"}, "--port: Value 70000 not in range 0 to 65535");
  check_rejected({"launch", "--hostfile", "none.txt", "--port", "-1"}, "--port: Value -1 not in range 0 to 65535");
  for (const char* bad : {"-1", "nan", "inf", "0"})
    check_rejected({"launch", "--hostfile", "none.txt", "--join-timeout", bad},
                   std::string("--join-timeout: Value ") + bad + " is not a number of seconds from 0.1 to 86400");
  check_rejected({"node", "--node-index", "-2"}, "--node-index: Value -2 not in range 0 to 1048576");
}

TEST_CASE("troupe --version and --help succeed on stdout", "[cli]") {
  TempDir dir;
  const ProcessResult version = run_troupe(dir, {"--version"});
  CHECK(version.exit_code == 0);
  CHECK_THAT(version.out, StartsWith("troupe "));
  const ProcessResult help = run_troupe(dir, {"train", "--help"});
  CHECK(help.exit_code == 0);
  CHECK_THAT(help.out, Contains("--train.steps"));
  CHECK_THAT(help.out, Contains("--config"));
  CHECK(help.err.empty());
  CHECK(std::filesystem::is_empty(dir.path()));
}

TEST_CASE("troupe train --print-config shows the file with overrides applied", "[cli]") {
  TempDir dir;
  const ProcessResult result = run_troupe(dir, {"train", "--config", TROUPE_SOURCE_DIR "/configs/tiny.toml",
                                               "--train.steps=3", "--train.seq_len", "0", "--print-config"});
  INFO("stderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("preset = \"tiny\""));
  CHECK_THAT(result.out, Contains("steps = 3\n"));
  CHECK_THAT(result.out, Contains("seq_len = 128\n"));  // resolved from tiny's block_size
}

TEST_CASE("the flags --resume and --trace set checkpoint.resume and pipeline.trace", "[cli]") {
  TempDir dir;
  const ProcessResult result = run_troupe(
      dir, {"train", "--checkpoint.dir", "ckpt", "--resume", "--trace", "run.json", "--print-config"});
  INFO("stderr: " << result.err);
  CHECK(result.exit_code == 0);
  CHECK_THAT(result.out, Contains("resume = true\n") && Contains("trace = \"run.json\"\n"));
}
