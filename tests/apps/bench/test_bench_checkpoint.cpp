// troupe bench checkpoint on tiny, one round: it runs the real save paths, prints its figures in
// the documented lines, and leaves nothing in the folder it wrote in. What the figures are is
// the bench's business (docs/benchmarks.md), not a test's.

#include <catch2/catch.hpp>

#include <filesystem>
#include <regex>
#include <string>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

namespace {

// The numbers a line of `out` matching `pattern` captures; fails the test when no line matches.
std::smatch figures(const std::string& out, const std::string& pattern) {
  std::smatch match;
  INFO("stdout: " << out);
  REQUIRE(std::regex_search(out, match, std::regex(pattern)));
  return match;
}

double number(const std::smatch& match, int group) { return std::stod(match[group].str()); }

}  // namespace

TEST_CASE("bench checkpoint prints disk speed, save throughput and async stall, and cleans up", "[bench]") {
  TempDir cwd;
  TempDir target;
  const ProcessResult result = run_troupe(
      cwd, {"bench", "checkpoint", "--model", "tiny", "--rounds", "1", "--steps", "2", "--dir", target.path().string()},
      std::chrono::seconds(120));
  INFO("stderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);

  const std::smatch header = figures(result.out, R"(param, adam_m, adam_v: ([0-9.]+) MB\))");
  const double state_mb = number(header, 1);
  // tiny: 0.84M parameters and two moments of as many floats.
  CHECK(state_mb > 9.5);
  CHECK(state_mb < 11);

  const std::smatch disk = figures(result.out, R"(\ndisk sequential write: ([0-9.]+) GB/s \(([0-9]+) MB, one fsync\))");
  CHECK(number(disk, 1) > 0);
  CHECK(number(disk, 2) >= 2 * state_mb);

  const std::smatch save = figures(
      result.out,
      R"(\ncheckpoint save \(sync, ([0-9.]+) MB in ([0-9]+) files, [^)]*\): ([0-9.]+) GB/s = ([0-9.]+) of disk)");
  // The shard holds the state plus its JSON header; the manifest is the other file.
  CHECK(number(save, 1) >= state_mb);
  CHECK(number(save, 1) < state_mb + 1);
  CHECK(save[2] == "2");
  CHECK(number(save, 3) > 0);
  CHECK(number(save, 4) > 0);

  const std::smatch async = figures(
      result.out,
      R"(\nasync save: after_step returns in ([0-9.]+) ms = ([0-9.]+)% of a ([0-9.]+) s step )"
      R"(.*take ([0-9.]+) s \(([-+][0-9.]+)%\))");
  CHECK(number(async, 1) > 0);
  CHECK(number(async, 3) > 0);
  CHECK(number(async, 4) > 0);

  CHECK(std::filesystem::is_empty(target.path()));
  CHECK(std::filesystem::is_empty(cwd.path()));
}

TEST_CASE("bench checkpoint refuses a bad round count, an unknown model and a missing folder", "[bench]") {
  TempDir dir;
  check_rejected_in(dir, {"bench", "checkpoint", "--rounds", "0"}, "--rounds");
  check_rejected_in(dir, {"bench", "checkpoint", "--model", "huge"}, "huge");
  check_rejected_in(dir, {"bench", "checkpoint", "--dir", "no-such-folder"}, "no-such-folder");
  CHECK(std::filesystem::is_empty(dir.path()));
}
