// troupe bench allreduce on 2 and 3 processes, 1 MiB, three iterations: both reference tables
// print, and every all-reduce row carries a positive time, a busbw that is the time's, and the
// ratios to the ring as messages and to the interleaved stream. What the figures are is the
// bench's business (docs/benchmarks.md).

#include <catch2/catch.hpp>

#include <regex>
#include <string>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

TEST_CASE("bench allreduce prints busbw beside the ring as messages and the stream of the same run", "[bench]") {
  TempDir cwd;
  const ProcessResult result = run_troupe(
      cwd, {"bench", "allreduce", "--processes", "2,3", "--mib", "1", "--iterations", "3"}, std::chrono::seconds(120));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::Contains("point-to-point bandwidth") && Catch::Contains("troupe engine"));

  const std::regex row(R"(\n +([23]) +1 MiB +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+))");
  int rows = 0;
  for (auto it = std::sregex_iterator(result.out.begin(), result.out.end(), row); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const int processes = std::stoi(m[1].str());
    const double ms = std::stod(m[2].str()), busbw = std::stod(m[3].str());
    CHECK(ms > 0);
    CHECK(std::stod(m[4].str()) > 0);  // the ring as messages
    CHECK(std::stod(m[5].str()) > 0);  // x faster
    CHECK(std::stod(m[6].str()) > 0);  // busbw / the interleaved stream
    CHECK(std::stod(m[7].str()) > 0);  // busbw / the interleaved stream both ways, each way's rate
    // busbw = 2(n-1)/n * bytes / time, as printed (rounded).
    CHECK(busbw == Approx(2.0 * (processes - 1) / processes * (1 << 20) / (ms * 1e-3) / 1e9).epsilon(0.05));  // ms printed to 3 decimals
    ++rows;
  }
  CHECK(rows == 2);
}
