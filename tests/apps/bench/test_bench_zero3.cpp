// troupe bench zero3 on tiny, three iterations: each prints the three variants' throughputs and
// the ratios they give, and the bytes per rank follow from the sharding: ZeRO-3 keeps half of
// ZeRO-0's model state on 2 ranks, and full recomputation keeps fewer activations.

#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

TEST_CASE("bench zero3 steps the three variants in turns and prints their ratios and bytes", "[bench][zero3]") {
  TempDir cwd;
  const ProcessResult result =
      run_troupe(cwd, {"bench", "zero3", "--model", "tiny", "--steps", "3", "--warmup", "1"}, std::chrono::seconds(120));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);

  CHECK(check_iteration_ratios(result.out) == 3);
  std::smatch kept;
  REQUIRE(std::regex_search(result.out, kept, std::regex(R"(ZeRO-3 / ZeRO-0: model state ([0-9.]+) kept)")));
  // Two ranks: each keeps its half of the parameters, gradients and moments (to one element).
  CHECK(std::stod(kept[1].str()) == Approx(0.5).margin(0.001));
  std::smatch activations;
  REQUIRE(std::regex_search(result.out, activations,
                            std::regex(R"(ZeRO-3 \+ full recompute / ZeRO-0: activations ([0-9.]+))")));
  CHECK(std::stod(activations[1].str()) < 1.0);
}

TEST_CASE("bench zero3 refuses one process and an unknown model", "[bench][zero3]") {
  TempDir dir;
  check_rejected_in(dir, {"bench", "zero3", "--processes", "1"}, "--processes");
  check_rejected_in(dir, {"bench", "zero3", "--model", "huge"}, "huge");
}
