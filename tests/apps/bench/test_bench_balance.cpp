// troupe bench balance on tiny, 6 micro-batches of 1 sequence a step, a few steps a turn: replica 1
// is held to half a core, or the output says why not; the table has each replica alone and the
// three splits with their shares and tokens/s, and the closing figures are those of the table; the
// slowdown turn reports each edge's first change.

#include <catch2/catch.hpp>

#include <map>
#include <regex>
#include <string>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

TEST_CASE("bench balance prints each replica alone and the uniform, static and dynamic splits, with dynamic's settling",
          "[bench][balance]") {
  TempDir cwd;
  const ProcessResult result = run_troupe(cwd,
                                          {"bench", "balance", "--model", "tiny", "--grad-accum", "3", "--batch", "1",
                                           "--steps", "3", "--warmup", "5", "--window", "2", "--slowdown", "6,16"},
                                          std::chrono::seconds(120));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);
  CHECK(std::regex_search(result.out, std::regex(R"(\nreplica 1 (held to 50 % of a core: cgroup|not held to 50 %))")));

  struct Row {
    std::string shares;
    double tokens_per_second = 0;
  };
  std::map<std::string, Row> rows;
  const std::regex line(R"(\n(alone 0|alone 1|none|static|dynamic) +(-|\d+, \d+) +(\d+)(?=\n))");
  for (auto it = std::sregex_iterator(result.out.begin(), result.out.end(), line); it != std::sregex_iterator(); ++it)
    rows[(*it)[1].str()] = {(*it)[2].str(), std::stod((*it)[3].str())};
  REQUIRE(rows.size() == 5);
  for (const auto& [name, row] : rows) {
    INFO(name);
    CHECK(row.tokens_per_second > 0);
  }
  CHECK(rows["none"].shares == "3, 3");
  CHECK(rows["static"].shares == "4, 2");  // 6 micro-batches at speeds 1, 0.5

  std::smatch m;
  REQUIRE(std::regex_search(result.out, m, std::regex(R"(dynamic / uniform: ([0-9.]+)x)")));
  CHECK(std::stod(m[1].str()) ==
        Approx(rows["dynamic"].tokens_per_second / rows["none"].tokens_per_second).epsilon(0.02));
  REQUIRE(std::regex_search(result.out, m,
                            std::regex(R"(dynamic / ideal: ([0-9.]+) \(ideal = alone 0 \+ alone 1 = (\d+) tokens/s)")));
  const double ideal = rows["alone 0"].tokens_per_second + rows["alone 1"].tokens_per_second;
  CHECK(std::stod(m[2].str()) == Approx(ideal).margin(2));
  CHECK(std::stod(m[1].str()) == Approx(rows["dynamic"].tokens_per_second / ideal).epsilon(0.02));
  REQUIRE(
      std::regex_search(result.out, m,
                        std::regex(R"(dynamic settled on replica 0 taking (\d+) of 6 micro-batches \(([0-9.]+) %\) )"
                                   R"(against the speed ratio ([0-9.]+) % \(alone 0 / ideal\), after step (\d+) )"
                                   R"(\((\d+) change\(s\), window 2\))")));
  const int settled = std::stoi(m[1].str());
  CHECK(settled >= 1);
  CHECK(settled <= 5);
  CHECK(rows["dynamic"].shares == std::to_string(settled) + ", " + std::to_string(6 - settled));
  CHECK(std::stod(m[3].str()) > 0);
  CHECK(std::stod(m[3].str()) < 100);
  // The last change lies within the turn's 8 steps, and there is none when it ends at step 0.
  CHECK(std::stoi(m[4].str()) <= 8);
  CHECK((std::stoi(m[4].str()) == 0) == (std::stoi(m[5].str()) == 0));
  // The slowdown turn: each edge followed by a change (of shares summing to 6) some steps after it,
  // or none (a machine too busy to tell the replicas apart, or no quota).
  REQUIRE(std::regex_search(result.out, m,
                            std::regex(R"(slowdown of replica 1 from step 6 to step 16: followed by (.*); )"
                                       R"(its end by (.*)\n)")));
  const std::regex followed(R"(no change|shares (\d+), (\d+) after step (\d+) \((\d+) step\(s\)\))");
  for (int edge = 1; edge <= 2; ++edge) {
    const std::string text = m[edge].str();
    std::smatch f;
    INFO(text);
    REQUIRE(std::regex_match(text, f, followed));
    if (f[1].matched) {
      CHECK(std::stoi(f[1].str()) + std::stoi(f[2].str()) == 6);
      CHECK(std::stoi(f[3].str()) - (edge == 1 ? 6 : 16) + 1 == std::stoi(f[4].str()));
    }
  }
  // ... and where the shares stood at the slowdown's last step and at the turn's last.
  REQUIRE(std::regex_search(
      result.out, m,
      std::regex(R"(shares after step 15, the slowdown's last: (\d+), (\d+); after step 26: (\d+), (\d+)\n)")));
  CHECK(std::stoi(m[1].str()) + std::stoi(m[2].str()) == 6);
  CHECK(std::stoi(m[3].str()) + std::stoi(m[4].str()) == 6);
}

TEST_CASE("bench balance refuses a slowdown that does not end after it starts", "[bench][balance][cli]") {
  TempDir cwd;
  check_rejected_in(cwd, {"bench", "balance", "--slowdown", "5,3"},
                    "--slowdown '5,3': give the steps the slowdown starts and ends at, FROM,TO with 1 <= FROM < TO");
  check_rejected_in(cwd, {"bench", "balance", "--slowdown", "20"}, "--slowdown '20'");
}
