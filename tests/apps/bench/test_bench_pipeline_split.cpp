// troupe bench pipeline --stage-speeds on tiny, 8 micro-batches of 1 sequence, one measured step
// (enough micro-batches that the steady state outweighs the fill and drain): the second stage is held to half a core,
// or the output says why not; the table has the balanced and the speed split, the speed split giving the fast first
// stage more blocks, each with a measured and a predicted tokens/s, and the closing ratios are those of the table.

#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <string>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

TEST_CASE("bench pipeline --stage-speeds runs the balanced and the speed split and prints each beside the simulator",
          "[bench][speed]") {
  TempDir cwd;
  const ProcessResult result = run_troupe(cwd,
                                          {"bench", "pipeline", "--model", "tiny", "--stage-speeds", "1,0.5",
                                           "--microbatches", "8", "--batch", "1", "--steps", "1", "--warmup", "0"},
                                          std::chrono::seconds(120));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);
  CHECK(std::regex_search(result.out, std::regex(R"(\nstage 1 (held to 50 % of a core: cgroup|not held to 50 %))")));

  struct Row {
    int first_last = 0;  // the first stage's last block
    double measured = 0, predicted = 0, ratio = 0, fast_speed = 0, slow_speed = 0, at_speeds = 0, at_speeds_ratio = 0;
  };
  std::map<std::string, Row> rows;
  const std::regex line(
      R"(\n(balanced|speed) +0-(\d+) \| \d+-3 +(\d+) +(\d+) +([0-9.]+)  ([0-9.]+),([0-9.]+) +(\d+) +([0-9.]+)(?=\n))");
  for (auto it = std::sregex_iterator(result.out.begin(), result.out.end(), line); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    rows[m[1].str()] = {std::stoi(m[2].str()), std::stod(m[3].str()), std::stod(m[4].str()), std::stod(m[5].str()),
                        std::stod(m[6].str()), std::stod(m[7].str()), std::stod(m[8].str()), std::stod(m[9].str())};
  }
  REQUIRE(rows.size() == 2);
  CHECK(rows["speed"].first_last > rows["balanced"].first_last);  // the fast stage takes more blocks
  for (const auto& [name, row] : rows) {
    INFO(name);
    CHECK(row.measured > 0);
    CHECK(row.predicted > 0);
    CHECK(row.ratio == Approx(row.measured / row.predicted).epsilon(0.01));
    CHECK(row.fast_speed == 1.0);  // each stage's speed is measured against the fastest's
    CHECK(row.slow_speed > 0);
    // The simulator at the speeds the run measured: a prediction of its own, its ratio the measured one over it.
    CHECK(row.at_speeds > 0);
    CHECK(row.at_speeds_ratio == Approx(row.measured / row.at_speeds).epsilon(0.01));
  }
  std::smatch closing;
  REQUIRE(std::regex_search(result.out, closing,
                            std::regex(R"(speed / balanced: ([0-9.]+)x measured, ([0-9.]+)x predicted)")));
  CHECK(std::stod(closing[1].str()) == Approx(rows["speed"].measured / rows["balanced"].measured).epsilon(0.01));
  // The simulator sees the slow stage's work shrink: the split by speed is predicted faster.
  CHECK(std::stod(closing[2].str()) > 1);
}
