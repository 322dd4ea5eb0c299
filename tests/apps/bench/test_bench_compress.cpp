// troupe bench compress on tiny, on this host: every iteration prints the three variants'
// throughputs and the ratios they give; the bytes per step follow from the model (f32 for plain,
// half for bf16, PowerSGD's factors at rank 4 about 20 times fewer).

#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

TEST_CASE("bench compress steps plain, bf16 and PowerSGD in turns and prints their bytes and ratios",
          "[bench][compression]") {
  TempDir cwd;
  const ProcessResult result = run_troupe(
      cwd, {"bench", "compress", "--model", "tiny", "--steps", "2", "--warmup", "1"}, std::chrono::seconds(120));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);

  CHECK(check_iteration_ratios(result.out) == 2);
  auto bytes_of = [&](const std::string& variant) {
    std::smatch m;
    REQUIRE(std::regex_search(result.out, m, std::regex("\n" + variant + R"( +([0-9]+) +([0-9.]+)x)")));
    return std::stod(m[1].str());
  };
  const double total =
      static_cast<double>(troupe::compute::ParameterLayout(*troupe::compute::gpt_preset("tiny")).total());
  CHECK(bytes_of("none") == total * 4);
  CHECK(bytes_of("bf16") == total * 2);
  CHECK(bytes_of("none") / bytes_of("powersgd") > 15);
}

TEST_CASE("bench compress refuses an unknown model and more than two hosts", "[bench][compression]") {
  TempDir dir;
  check_rejected_in(dir, {"bench", "compress", "--model", "huge"}, "huge");
  check_rejected_in(dir, {"bench", "compress", "--hosts", "3"}, "--hosts");
}
