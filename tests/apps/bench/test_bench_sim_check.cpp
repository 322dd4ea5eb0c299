// troupe bench sim-check on tiny, one step a layout and backend: the machine's figures are
// printed, then rank 0's step op by op and a row for each layout, each with a measured and a
// simulated time and their ratio, every ratio the one its two times give. What the figures are
// is the bench's business (docs/scale.md): no timing is asserted.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

namespace {

struct Row {
  std::string name;
  std::vector<double> figures;
};

// The lines that start with one of `names` followed by `count` numbers, to the line's end.
std::vector<Row> rows_in(const std::string& out, const std::string& names, int count) {
  std::string pattern = "\n(" + names + ")";
  for (int i = 0; i < count; ++i) pattern += R"( +([0-9.]+|inf|nan))";
  const std::regex line(pattern + "(?=\n)");
  std::vector<Row> found;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    Row row{m[1].str(), {}};
    for (int i = 0; i < count; ++i) row.figures.push_back(std::stod(m[static_cast<std::size_t>(i) + 2].str()));
    found.push_back(row);
  }
  return found;
}

}  // namespace

TEST_CASE("bench sim-check prints measured and simulated step times of both layouts and their ratios", "[bench]") {
  TempDir cwd;
  const ProcessResult result = run_troupe(cwd,
                                          {"bench", "sim-check", "--model", "tiny", "--steps", "1", "--warmup", "0",
                                           "--batch", "1", "--microbatches", "2", "--stage-batch", "1"},
                                          std::chrono::seconds(180));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);

  std::smatch machine;
  REQUIRE(std::regex_search(result.out, machine,
                            std::regex(R"(sgemm peak ([0-9.]+) GFLOP/s, copy ([0-9.]+) GB/s; loopback link )"
                                       R"(([0-9.]+) GB/s, ([0-9.]+) us a message)")));
  for (int i = 1; i <= 4; ++i) CHECK(std::stod(machine[i].str()) > 0);

  // layout, measured s, its CPU s, simulated s, sim/measured
  const std::vector<Row> layouts = rows_in(result.out, R"(dp 2 x batch 1|pipeline 1f1b 2 x 2 x batch 1)", 4);
  REQUIRE(layouts.size() == 2);
  CHECK(layouts[0].name == "dp 2 x batch 1");
  CHECK(layouts[1].name == "pipeline 1f1b 2 x 2 x batch 1");
  for (const Row& row : layouts) {
    const double measured = row.figures[0], cpu = row.figures[1], simulated = row.figures[2], ratio = row.figures[3];
    CHECK(measured > 0);
    CHECK(cpu > 0);
    CHECK(simulated > 0);
    CHECK(std::isfinite(ratio));
    CHECK(ratio == Approx(simulated / measured).epsilon(0.02).margin(0.002));
  }

  // Every op a step runs is timed on both backends: the matmuls and the optimizer among them.
  // op, measured ms, modelled ms, sim/measured
  const std::vector<Row> ops = rows_in(result.out, R"([a-z_]+)", 3);
  std::vector<std::string> names;
  for (const Row& op : ops) {
    names.push_back(op.name);
    CHECK(op.figures[0] >= 0);
    CHECK(op.figures[1] >= 0);
    CHECK(std::isfinite(op.figures[2]));
  }
  CHECK(std::find(names.begin(), names.end(), "matmul_forward") != names.end());
  CHECK(std::find(names.begin(), names.end(), "adamw_update") != names.end());
}

TEST_CASE("bench sim-check refuses one process and an unknown model", "[bench]") {
  TempDir dir;
  check_rejected_in(dir, {"bench", "sim-check", "--processes", "1"}, "--processes");
  check_rejected_in(dir, {"bench", "sim-check", "--model", "huge"}, "huge");
}
