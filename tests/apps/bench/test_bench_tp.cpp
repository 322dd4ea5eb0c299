// troupe bench tp on tiny, three iterations: the processes take their turns in the rotating
// order, each iteration prints the ratios its throughputs give, and the bytes the comm engine and
// the memory ledger counted equal the closed forms printed beside them.

#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

TEST_CASE("bench tp takes turns and prints bytes moved and held equal to their closed forms", "[bench][tp]") {
  TempDir cwd;
  const ProcessResult result =
      run_troupe(cwd, {"bench", "tp", "--model", "tiny", "--steps", "3", "--warmup", "1"}, std::chrono::seconds(120));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);

  const std::regex line(
      R"(\n(\d+) +(1 ind tp|ind tp 1|tp 1 ind) +([0-9]+) +([0-9]+) +([0-9]+) +([0-9.]+) +([0-9.]+) +([0-9.]+) +([0-9.]+))");
  std::vector<std::string> orders;
  for (auto it = std::sregex_iterator(result.out.begin(), result.out.end(), line); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    const double single = std::stod(m[3].str()), independent = std::stod(m[4].str()), tp = std::stod(m[5].str());
    CHECK(single > 0);
    CHECK(independent > 0);
    CHECK(tp > 0);
    // Throughputs are printed rounded to a token/s; the ratios from the unrounded ones.
    CHECK(std::stod(m[6].str()) == Approx(tp / (2 * single)).epsilon(0.01));
    CHECK(std::stod(m[7].str()) == Approx(independent / (2 * single)).epsilon(0.01));
    CHECK(std::stod(m[8].str()) == Approx(tp / independent).epsilon(0.01));
    // The shards wait for four sums per block and more: never no time at all.
    CHECK(std::stod(m[9].str()) > 0);
    orders.push_back(m[2].str());
  }
  // One warm-up iteration ran first in the order "1 ind tp", so the measured ones start one on.
  CHECK(orders == std::vector<std::string>{"ind tp 1", "tp 1 ind", "1 ind tp"});
  CHECK(std::regex_search(result.out, std::regex(R"(scaling \(2 shards x 1 thread vs 1 x 1, median of iterations\) = [0-9.]+)")));

  // tiny: 4 blocks, B*T*C = 8 x 128 x 128; (4 x 4 + 2) sums of it in f32 and the gradient norm's f64.
  std::smatch reduced;
  REQUIRE(std::regex_search(result.out, reduced, std::regex(R"(all-reduce: measured ([0-9-]+), closed form ([0-9]+))")));
  CHECK(reduced[1].str() == reduced[2].str());
  CHECK(reduced[2].str() == std::to_string(18 * 8 * 128 * 128 * 4 + 8));
  std::smatch gathered;
  REQUIRE(std::regex_search(result.out, gathered, std::regex(R"(all-gather: measured ([0-9-]+), closed form ([0-9]+))")));
  CHECK(gathered[1].str() == gathered[2].str());
  CHECK(gathered[2].str() == std::to_string(2 * 8 * 128 * 3 * 4));

  std::smatch held;
  REQUIRE(std::regex_search(result.out, held,
                            std::regex(R"(each shard ([0-9-]+) bytes .*, 1 process ([0-9]+) .*: ([0-9.]+); closed form ([0-9.]+))")));
  CHECK(std::stod(held[1].str()) > 0);
  CHECK(held[3].str() == held[4].str());
  // About half: the replicated wpe and LayerNorms are a few percent of tiny.
  CHECK(std::stod(held[3].str()) == Approx(0.5).margin(0.05));
}

TEST_CASE("bench tp refuses shards that do not divide the model, one shard and an unknown model", "[bench][tp]") {
  TempDir dir;
  check_rejected_in(dir, {"bench", "tp", "--shards", "4"}, "bench tp --shards 4 on small: tensor.shards 4 does not divide model.n_head (6)");
  check_rejected_in(dir, {"bench", "tp", "--shards", "1"}, "--shards");
  check_rejected_in(dir, {"bench", "tp", "--model", "huge"}, "huge");
}
