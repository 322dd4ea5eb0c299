// troupe bench diloco on tiny, on this host: the three modes' turns print their bytes per step and
// tokens/s; plain carries the f32 gradients every step, DiLoCo its bf16 fragments once per H steps.

#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "apps/run_troupe.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

TEST_CASE("bench diloco runs plain, PowerSGD and DiLoCo in turns and prints their bytes per step", "[bench][diloco]") {
  TempDir cwd;
  // H 2 in 2 fragments over 4 measured steps: every fragment syncs twice, in bf16.
  const ProcessResult result = run_troupe(cwd,
                                          {"bench", "diloco", "--model", "tiny", "--steps", "4", "--warmup", "1",
                                           "--every", "2", "--fragments", "2", "--batch", "2"},
                                          std::chrono::seconds(120));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);
  auto bytes_of = [&](const std::string& mode) {
    std::smatch m;
    REQUIRE(std::regex_search(result.out, m, std::regex(" " + mode + R"( +([0-9]+) +([0-9.]+)x +([0-9]+))")));
    CHECK(std::stod(m[3].str()) > 0);  // tokens/s
    return std::stod(m[1].str());
  };
  const double total =
      static_cast<double>(troupe::compute::ParameterLayout(*troupe::compute::gpt_preset("tiny")).total());
  CHECK(bytes_of("plain") == total * 4);
  CHECK(bytes_of("powersgd") < total * 4);
  // Two syncs of every fragment, 2 bytes a parameter, over 4 steps: the parameters' count per step.
  CHECK(bytes_of("diloco") == total);
}

TEST_CASE("bench diloco refuses more fragments than blocks, more than two hosts and an unknown precision",
          "[bench][diloco]") {
  TempDir dir;
  check_rejected_in(dir, {"bench", "diloco", "--model", "tiny", "--fragments", "5"},
                    "bench diloco: --fragments 5 and --overlap");
  check_rejected_in(dir, {"bench", "diloco", "--hosts", "3"}, "--hosts");
  check_rejected_in(dir, {"bench", "diloco", "--precision", "fp8"},
                    "bench diloco: --precision: expected f32, bf16 or int8, got 'fp8'");
  check_rejected_in(dir, {"bench", "diloco", "--rate", "fast; reboot"}, "--rate");
}
