// troupe bench dp on tiny, three iterations: the processes take their turns in the rotating
// order, every iteration prints its three throughputs, and the ratios printed are the ones
// those throughputs give. What the figures are is the bench's business (docs/benchmarks.md).

#include <catch2/catch.hpp>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

namespace {

struct Iteration {
  int index;
  std::string order;
  double single, independent, dp, scaling, share, communication;
};

std::vector<Iteration> iterations_in(const std::string& out) {
  const std::regex line(
      R"(\n(\d+) +(1 ind dp|ind dp 1|dp 1 ind) +([0-9]+) +([0-9]+) +([0-9]+) +([0-9.]+) +([0-9.]+) +([0-9.]+))");
  std::vector<Iteration> found;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    found.push_back({std::stoi(m[1].str()), m[2].str(), std::stod(m[3].str()), std::stod(m[4].str()),
                     std::stod(m[5].str()), std::stod(m[6].str()), std::stod(m[7].str()), std::stod(m[8].str())});
  }
  return found;
}

}  // namespace

TEST_CASE("bench dp takes turns step by step and prints each iteration's ratios", "[bench]") {
  TempDir cwd;
  const ProcessResult result =
      run_troupe(cwd, {"bench", "dp", "--model", "tiny", "--steps", "3", "--warmup", "1"}, std::chrono::seconds(120));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);

  const std::vector<Iteration> iterations = iterations_in(result.out);
  REQUIRE(iterations.size() == 3);
  // One warm-up iteration ran first in the order "1 ind dp", so the measured ones start one on.
  CHECK(iterations[0].order == "ind dp 1");
  CHECK(iterations[1].order == "dp 1 ind");
  CHECK(iterations[2].order == "1 ind dp");
  std::vector<double> scalings;
  for (const Iteration& it : iterations) {
    CHECK(it.single > 0);
    CHECK(it.independent > 0);
    CHECK(it.dp > 0);
    // Throughputs are printed rounded to a token/s; the ratios from the unrounded ones.
    CHECK(it.scaling == Approx(it.dp / (2 * it.single)).epsilon(0.01));
    CHECK(it.share == Approx(it.independent / (2 * it.single)).epsilon(0.01));
    CHECK(it.communication == Approx(it.dp / it.independent).epsilon(0.01));
    scalings.push_back(it.scaling);
  }
  std::sort(scalings.begin(), scalings.end());
  std::smatch summary;
  REQUIRE(std::regex_search(result.out, summary,
                            std::regex(R"(scaling \(2 processes x 1 thread vs 1 x 1, median of iterations\) = ([0-9.]+))")));
  CHECK(std::stod(summary[1].str()) == Approx(scalings[1]).margin(0.0011));
}

TEST_CASE("bench dp refuses one process and an unknown model", "[bench]") {
  TempDir dir;
  check_rejected_in(dir, {"bench", "dp", "--processes", "1"}, "--processes");
  check_rejected_in(dir, {"bench", "dp", "--model", "huge"}, "huge");
}
