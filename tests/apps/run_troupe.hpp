#pragma once
// Running the built troupe binary as a user would, for the tests of tests/apps/: in a test's
// own directory, output captured, killed if it outlives the timeout.

#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <string>
#include <vector>

#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

namespace troupe::test {

inline ProcessResult run_troupe(const TempDir& dir, std::vector<std::string> args,
                                std::chrono::milliseconds timeout = std::chrono::seconds(20)) {
  args.insert(args.begin(), TROUPE_BINARY_DIR "/troupe");
  return run_process(args, dir.path().string(), timeout);
}

// The options of a quick job on tiny: `steps` steps on one thread, one validation batch at the end
// only, no sample. The command ("train", "launch") comes first, from the caller.
inline std::vector<std::string> tiny_steps(long steps) {
  return {"--model.preset", "tiny", "--train.steps", std::to_string(steps), "--train.val_batches", "1",
          "--sample.tokens", "0", "--train.threads", "1", "--train.val_every", "0"};
}

// `args` followed by `more`: a job's arguments with a layout's.
inline std::vector<std::string> with(std::vector<std::string> args, const std::vector<std::string>& more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// How many times `text` holds `part`: a line a job logs once, or a process that joined once.
inline std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (std::size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++count;
  return count;
}

// Runs troupe with args in `dir` and checks the command was refused as bad input: exit code 2,
// nothing on stdout, one "troupe: error:" line on stderr naming `what`.
inline ProcessResult check_rejected_in(const TempDir& dir, const std::vector<std::string>& args,
                                       const std::string& what) {
  const ProcessResult result = run_troupe(dir, args);
  INFO("stderr: " << result.err);
  REQUIRE(!result.timed_out);
  CHECK(result.exit_code == 2);
  CHECK(result.out.empty());
  CHECK_THAT(result.err, Catch::StartsWith("troupe: error:"));
  CHECK_THAT(result.err, Catch::Contains(what));
  CHECK(std::count(result.err.begin(), result.err.end(), '\n') == 1);
  return result;
}

// A turn-taking bench's iteration lines, "N  base  a  b  a/base  b/base" (bench zero3, bench
// compress): checks each printed ratio against the printed throughputs (rounded to a token/s, so
// within 1%) and returns how many lines there were.
inline int check_iteration_ratios(const std::string& out) {
  const std::regex line(R"(\n(\d+) +([0-9]+) +([0-9]+) +([0-9]+) +([0-9.]+) +([0-9.]+))");
  int iterations = 0;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const double base = std::stod(m[2].str()), a = std::stod(m[3].str()), b = std::stod(m[4].str());
    CHECK(base > 0);
    CHECK(std::stod(m[5].str()) == Approx(a / base).epsilon(0.01));
    CHECK(std::stod(m[6].str()) == Approx(b / base).epsilon(0.01));
    ++iterations;
  }
  return iterations;
}

// The number printed after `label` ("param norm 37.04"); fails the test when there is none.
inline double number_after(const std::string& text, const std::string& label) {
  std::smatch match;
  REQUIRE(std::regex_search(text, match, std::regex(label + " ([0-9.]+)")));
  return std::stod(match[1].str());
}

// A file's whole contents; empty when it cannot be read.
inline std::string file_text(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

}  // namespace troupe::test
