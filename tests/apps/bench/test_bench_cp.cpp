// troupe bench cp at its smallest: one sequence length, one measured iteration. The table has a row
// per side (one process, ring, all_to_all) with finite figures, the scaling is the tokens/s ratio it
// is defined as, a context shard keeps less than the one process, and the ring's hidden share is
// a share.

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <regex>
#include <string>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

TEST_CASE("bench cp prints tokens/s, scaling, activations per rank and the ring's hidden share per side",
          "[bench][context]") {
  TempDir cwd;
  const ProcessResult result = run_troupe(cwd,
                                          {"bench", "cp", "--layers", "2", "--channels", "16", "--heads", "4", "--seqs",
                                           "512", "--shards", "2", "--steps", "1", "--warmup", "0"},
                                          std::chrono::seconds(180));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);
  CHECK_THAT(result.out, Catch::Contains("scaling = tokens/s at C / (C x tokens/s at 1)"));

  struct Row {
    int c = 0;
    double tps = 0, scaling = 0, held = 0, ratio = 0;
    std::string hidden;
  };
  std::map<std::string, Row> rows;
  const std::regex line(
      R"(\n +512  (one process|ring|all_to_all) +(\d+) +([0-9]+) +([0-9.]+) +([0-9.]+) +([0-9.]+)  (\S+))");
  for (auto it = std::sregex_iterator(result.out.begin(), result.out.end(), line); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    rows[m[1].str()] = {std::stoi(m[2].str()), std::stod(m[3].str()), std::stod(m[4].str()),
                        std::stod(m[5].str()), std::stod(m[6].str()), m[7].str()};
  }
  REQUIRE(rows.size() == 3);
  const Row& one = rows["one process"];
  CHECK(one.c == 1);
  CHECK(one.tps > 0);
  CHECK(one.held > 0);
  for (const char* side : {"ring", "all_to_all"}) {
    INFO(side);
    const Row& r = rows[side];
    CHECK(r.c == 2);
    CHECK(r.tps > 0);
    CHECK(std::isfinite(r.scaling));
    CHECK(r.scaling == Approx(r.tps / (2 * one.tps)).epsilon(0.02));
    CHECK(r.ratio > 0);
    CHECK(r.ratio < 1);  // a shard keeps T / 2 rows' activations and its context state
  }
  const double hidden = std::stod(rows["ring"].hidden);
  CHECK(std::isfinite(hidden));
  CHECK(hidden <= 1);
  CHECK(rows["all_to_all"].hidden == "-");
}
