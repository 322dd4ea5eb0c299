// troupe bench compute as a user runs it: rows per thread count, the per-op profile, and the
// PyTorch side driven through fake interpreters (no torch needed). The same command against a
// real PyTorch is tests/scripts/bench_vs_pytorch_test.sh, reported Skipped by name without one.

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <regex>
#include <string>

#include "apps/run_troupe.hpp"

using namespace troupe::test;

namespace {

constexpr auto kTimeout = std::chrono::seconds(120);

// A fake Python: a shell script in `dir` named `name`, executable.
std::string fake_python(const TempDir& dir, const std::string& name, const std::string& body) {
  const std::string path = dir.write(name, "#!/bin/sh\n" + body);
  ::chmod(path.c_str(), 0755);
  return path;
}

// How many times `pattern` matches in `text`.
long matches(const std::string& text, const std::string& pattern) {
  const std::regex re(pattern);
  return std::distance(std::sregex_iterator(text.begin(), text.end(), re), std::sregex_iterator());
}

// The number of the table's lines that start with `model` followed by `threads`.
long rows_of(const std::string& out, const std::string& model, int threads) {
  return matches(out, "\n" + model + " +" + std::to_string(threads) + " ");
}

}  // namespace

TEST_CASE("bench compute --threads 1,2 gives a row for each thread count in one process", "[cli]") {
  TempDir dir;
  const ProcessResult r = run_troupe(
      dir, {"bench", "compute", "--models", "tiny", "--threads", "1,2", "--steps", "1", "--warmup", "0"}, kTimeout);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("1 thread(s): sgemm peak"));
  CHECK_THAT(r.out, Catch::Contains("2 thread(s): sgemm peak"));
  CHECK(rows_of(r.out, "tiny", 1) == 1);
  CHECK(rows_of(r.out, "tiny", 2) == 1);
  CHECK_THAT(r.out, !Catch::Contains("pytorch"));
}

TEST_CASE("bench compute --profile prints each op's share of one step", "[cli]") {
  TempDir dir;
  const ProcessResult r =
      run_troupe(dir, {"bench", "compute", "--models", "tiny", "--steps", "1", "--warmup", "0", "--profile"}, kTimeout);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("time per op, one step timed op by op"));
  for (const char* op : {"matmul_forward", "matmul_residual_forward", "matmul_backward", "attention_forward",
                         "attention_backward", "layernorm_forward", "gelu_bias_backward", "adamw_update",
                         "(outside the ops)"})
    CHECK_THAT(r.out, Catch::Contains(std::string("  ") + op));
  CHECK(rows_of(r.out, "tiny", 1) == 1);
}

TEST_CASE("bench compute --vs-pytorch without torch says how to get one and prints Troupe's figures", "[cli]") {
  TempDir dir;
  const std::string python =
      fake_python(dir, "python", "echo \"ModuleNotFoundError: No module named 'torch'\"\nexit 1\n");
  const ProcessResult r = run_troupe(
      dir,
      {"bench", "compute", "--models", "tiny", "--steps", "1", "--warmup", "0", "--vs-pytorch", "--python", python},
      kTimeout);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("pytorch: not measured, " + python + " cannot import torch (ModuleNotFoundError"));
  CHECK_THAT(r.out, Catch::Contains("apt-get install python3-torch"));
  CHECK_THAT(r.out, Catch::Contains("python3 -m venv V && V/bin/pip install torch"));
  CHECK(rows_of(r.out, "tiny", 1) == 1);
  CHECK_THAT(r.out, !Catch::Contains("troupe/pytorch"));
}

// Answers the probe like torch_cpu_train.py, records each round's arguments in rounds.txt, and
// reports a fixed throughput per round.
constexpr const char* recording_script =
    "case \"$2\" in --probe) echo 'torch 9.9.9 attention sdpa adamw fused';;\n"
    "  *) echo \"$@\" >> rounds.txt; echo 'tokens_per_s 1000.0';;\nesac\n";

TEST_CASE("bench compute --vs-pytorch alternates rounds with the script and reports the median ratio", "[cli]") {
  TempDir dir;
  const std::string python = fake_python(dir, "python", recording_script);
  const ProcessResult r = run_troupe(dir,
                                     {"bench", "compute", "--models", "tiny", "--threads", "1,2", "--steps", "1",
                                      "--warmup", "0", "--rounds", "3", "--python", python},
                                     kTimeout);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("pytorch: torch 9.9.9 attention sdpa adamw fused, from " + python));
  for (const char* round : {"tiny, 1 thread(s), round 1/3", "tiny, 1 thread(s), round 3/3",
                            "tiny, 2 thread(s), round 1/3", "tiny, 2 thread(s), round 3/3"})
    CHECK_THAT(r.out, Catch::Contains(round));
  CHECK_THAT(r.out, Catch::Contains("troupe/pytorch"));
  // tiny's dimensions, batch and thread count reach the script, once per round.
  const std::string rounds = file_text(dir.path() / "rounds.txt");
  const std::string tiny = "--layers 4 --embd 128 --heads 4 --seq 128 --vocab 256 --padded-vocab 256 --batch 8";
  CHECK(matches(rounds, tiny + " --threads 1 ") == 3);
  CHECK(matches(rounds, tiny + " --threads 2 ") == 3);
  // Each row ends with PyTorch's 1000 tokens/s and a ratio.
  std::smatch row;
  REQUIRE(std::regex_search(r.out, row, std::regex("\ntiny +1 .* 1000 +([0-9.]+)\n")));
  CHECK(std::stod(row[1].str()) > 0);
}

TEST_CASE("bench compute --precision bf16 runs fp32 and bf16 in turn each round and hands PyTorch bf16 autocast",
          "[cli][bf16]") {
  TempDir dir;
  const std::string python = fake_python(dir, "python", recording_script);
  const ProcessResult r = run_troupe(dir,
                                     {"bench", "compute", "--models", "tiny", "--steps", "1", "--warmup", "0",
                                      "--rounds", "2", "--precision", "bf16", "--python", python},
                                     kTimeout);
  INFO(r.out << r.err);
  REQUIRE(r.exit_code == 0);
  // Which line depends on the CPU; one of them, once.
  CHECK(matches(r.out, "precision bf16: (products on [a-z0-9_]+ \\(oneDNN\\)|the products are emulated in fp32)") == 1);
  CHECK(matches(r.out,
                "tiny, 1 thread\\(s\\), round [12]/2: troupe fp32 [0-9]+ tokens/s, bf16 [0-9]+ tokens/s, "
                "bf16/fp32 [0-9.]+") == 2);
  CHECK(matches(file_text(dir.path() / "rounds.txt"), "--precision bf16") == 2);
  // The row: bf16's tokens/s, then fp32's and their ratio, bf16's activation bytes over fp32's (tiny
  // stores 64 C of its 76 C a token in bf16: 0.58), then PyTorch's and the ratio to it.
  std::smatch row;
  REQUIRE(std::regex_search(r.out, row,
                            std::regex("\ntiny +1 .* ([0-9]+) +([0-9.]+) +([0-9.]+) +1000 +([0-9.]+)\n")));
  CHECK(std::stod(row[2].str()) > 0);
  CHECK(std::stod(row[3].str()) == Approx(0.58).margin(0.01));
  CHECK(std::stod(row[4].str()) > 0);
  CHECK_THAT(r.out, !Catch::Contains("target tiny"));  // targets are small's
}

TEST_CASE("bench compute --vs-pytorch stops with an error when the PyTorch script fails", "[cli]") {
  TempDir dir;
  const std::string python = fake_python(
      dir, "python",
      "case \"$2\" in --probe) echo 'torch 9.9.9 attention sdpa adamw fused';;\n  *) echo boom; exit 1;;\nesac\n");
  const ProcessResult r = run_troupe(
      dir, {"bench", "compute", "--models", "tiny", "--steps", "1", "--warmup", "0", "--python", python}, kTimeout);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("pytorch | boom"));
  CHECK_THAT(r.err, Catch::StartsWith("troupe: error: bench compute --vs-pytorch: "));
  CHECK_THAT(r.err, Catch::Contains("torch_cpu_train.py failed under " + python));
}

TEST_CASE("bench compute --python that is missing or not executable is refused, naming it", "[cli]") {
  TempDir dir;
  check_rejected_in(dir, {"bench", "compute", "--python", "/no/such/python3"},
                    "--python /no/such/python3: not found or not executable");
  const std::string plain = dir.write("python", "#!/bin/sh\n");
  ::chmod(plain.c_str(), 0644);
  check_rejected_in(dir, {"bench", "compute", "--vs-pytorch", "--python", plain},
                    "--python " + plain + ": not found or not executable");
  check_rejected_in(dir, {"bench", "compute", "--python", "no-such-python-on-path"},
                    "--python no-such-python-on-path: not found or not executable");
}

TEST_CASE("bench compute --threads with an empty count is refused, not read as all cores", "[cli]") {
  TempDir dir;
  check_rejected_in(dir, {"bench", "compute", "--threads", ""}, "--threads: a thread count is empty");
}

TEST_CASE("bench compute and bench gpu refuse a precision other than fp32 or bf16 in one line", "[cli][bf16]") {
  TempDir dir;
  check_rejected_in(dir, {"bench", "compute", "--precision", "fp16"}, "--precision: fp16 not in {fp32,bf16}");
  check_rejected_in(dir, {"bench", "gpu", "--precision", "fp16"}, "--precision: fp16 not in {fp32,bf16}");
}
