// troupe bench scale at 8 ranks: one row and the slope row, every column of docs/scale.md's
// table in its order, the row's figures all there (the control plane's share of the step, the
// in-place and the restart recoveries among them). What the figures are is the bench's business.

#include <catch2/catch.hpp>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

namespace {

// The cells of the markdown table row that starts with `first`, its leading and trailing bars off.
std::vector<std::string> cells_of(const std::string& out, const std::string& first) {
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| " + first + " |", 0) != 0) continue;
    std::vector<std::string> cells;
    std::istringstream parts(line.substr(1));
    for (std::string cell; std::getline(parts, cell, '|');) {
      cell = std::regex_replace(cell, std::regex(R"(^ +| +$)"), "");
      cells.push_back(cell);
    }
    return cells;
  }
  return {};
}

}  // namespace

TEST_CASE("bench scale prints every column for 8 ranks, restart and the control plane's share among them",
          "[bench][slow]") {
  TempDir cwd;
  const ProcessResult result =
      run_troupe(cwd, {"bench", "scale", "--ranks", "8", "--slots", "4", "--steps", "8"}, std::chrono::minutes(8));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);
  const std::vector<std::string> header = cells_of(result.out, "ranks");
  const std::vector<std::string> expected{"ranks",      "nodes",     "joined s",  "job CPU/s", "status ms",
                                          "workers ms", "step s",    "plane %",   "commit s",  "detect s",
                                          "resume s",   "recover s", "restart s", "job MiB",   "MiB/rank"};
  CHECK(header == expected);
  const std::vector<std::string> row = cells_of(result.out, "8");
  REQUIRE(row.size() == expected.size());
  for (std::size_t i = 2; i < row.size(); ++i) {
    INFO(expected[i]);
    CHECK(row[i] != "–");
  }
  CHECK(result.out.find("largest N that ran here: 8") != std::string::npos);
  // tiny on an A100-class rank computes a step in microseconds: the bench slows the sim device to
  // 0.2 s of compute a step, which the measured step cannot undercut.
  CHECK(result.out.find("0.20 s of modelled compute a step (--step-compute)") != std::string::npos);
  CHECK(std::stod(row[6]) >= 0.2);
}
