// troupe bench pipeline on tiny, 4 micro-batches of 1 sequence, one measured step a round, two
// rounds: each round prints every schedule's bubble and tokens/s; the table's figures are the
// medians over the rounds, its ratios the medians of the ratios to 1F1B within each round, its
// closed forms those of the schedules (ZB-H1's at the forward, B and W it prints), and every
// schedule's ops vary (op spread).

#include <catch2/catch.hpp>

#include <cmath>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

TEST_CASE("bench pipeline runs every schedule once a round and sets each against 1F1B's run of the same round",
          "[bench][speed]") {
  TempDir cwd;
  const ProcessResult result = run_troupe(cwd,
                                          {"bench", "pipeline", "--model", "tiny", "--microbatches", "4", "--batch",
                                           "1", "--steps", "1", "--warmup", "0", "--rounds", "2"},
                                          std::chrono::seconds(120));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);
  CHECK(result.out.find("2 rounds of every schedule in turn, each the median of 1 steps") != std::string::npos);

  const std::vector<std::string> names = {"gpipe", "1f1b", "interleaved v=2", "zb-h1", "zb-v v=2"};
  struct Round {
    double bubble = 0, tokens = 0;
  };
  std::map<std::string, std::vector<Round>> rounds;
  const std::regex round_line(R"(\nround (\d)/2: bubble, tokens/s:([^\n]*))");
  int rounds_seen = 0;
  for (auto it = std::sregex_iterator(result.out.begin(), result.out.end(), round_line); it != std::sregex_iterator();
       ++it) {
    ++rounds_seen;
    CHECK(std::stoi((*it)[1].str()) == rounds_seen);
    const std::string entries = (*it)[2].str();
    const std::regex entry(R"( ([a-z0-9= -]+?) ([0-9.]+) (\d+);)");
    for (auto e = std::sregex_iterator(entries.begin(), entries.end(), entry); e != std::sregex_iterator(); ++e)
      rounds[(*e)[1].str()].push_back({std::stod((*e)[2].str()), std::stod((*e)[3].str())});
  }
  REQUIRE(rounds_seen == 2);
  for (const std::string& name : names) {
    INFO(name);
    REQUIRE(rounds[name].size() == 2);
  }

  struct Row {
    double measured = 0, bubble_ratio = 0, closed_form = 0, spread = 0, tokens = 0, tokens_ratio = 0;
  };
  std::map<std::string, Row> table;
  const std::regex row(
      R"(\n(gpipe|1f1b|interleaved v=2|zb-h1|zb-v v=2) +([0-9.]+) +([0-9.]+) +[0-9.]+ +[0-9.]+ +([0-9.]+|nan) +[0-9.]+ +[0-9.]+ +[0-9.]+ +([0-9.]+) +[0-9.]+ +(\d+) +([0-9.]+)(?=\n))");
  for (auto it = std::sregex_iterator(result.out.begin(), result.out.end(), row); it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    table[m[1].str()] = {
        std::stod(m[2].str()), std::stod(m[3].str()), m[4].str() == "nan" ? std::nan("") : std::stod(m[4].str()),
        std::stod(m[5].str()), std::stod(m[6].str()), std::stod(m[7].str())};
  }
  REQUIRE(table.size() == names.size());
  const std::vector<Round>& reference = rounds["1f1b"];
  for (const std::string& name : names) {
    INFO(name);
    const std::vector<Round>& own = rounds[name];
    const Row& r = table[name];
    // The median of two rounds is their mean; the rounds print 4 decimals, the table 3 (2 for ratios).
    CHECK(r.measured == Approx((own[0].bubble + own[1].bubble) / 2).margin(0.0011));
    // Ops of one kind on one stage do not take the same time twice, nor a multiple of it.
    CHECK(r.spread > 0);
    CHECK(r.spread < 1);
    CHECK(r.tokens == Approx((own[0].tokens + own[1].tokens) / 2).margin(1.1));
    CHECK(r.bubble_ratio ==
          Approx((own[0].bubble / reference[0].bubble + own[1].bubble / reference[1].bubble) / 2).margin(0.011));
    CHECK(r.tokens_ratio ==
          Approx((own[0].tokens / reference[0].tokens + own[1].tokens / reference[1].tokens) / 2).margin(0.011));
  }
  CHECK(table["1f1b"].bubble_ratio == 1.0);
  CHECK(table["1f1b"].tokens_ratio == 1.0);
  // (p-1)/(m+p-1) at p 2 m 4; interleaving's (p-1)/(vm+p-1) at v 2; ZB-V has none.
  CHECK(table["1f1b"].closed_form == Approx(0.2).margin(0.0005));
  CHECK(table["gpipe"].closed_form == Approx(0.2).margin(0.0005));
  CHECK(table["interleaved v=2"].closed_form == Approx(1.0 / 9).margin(0.0005));
  CHECK(std::isnan(table["zb-v v=2"].closed_form));
  // ZB-H1's at its measured costs: each stage idles (p-1)(F+B-W) against m(F+B+W) of work.
  std::smatch costs;
  REQUIRE(std::regex_search(
      result.out, costs,
      std::regex(
          R"(\nzb-h1 at its costs \(F ([0-9.]+), B ([0-9.]+), W ([0-9.]+) ms a micro-batch, medians over the rounds\): its closed form is ([0-9.]+)x 1F1B's\n)")));
  const double F = std::stod(costs[1].str()), B = std::stod(costs[2].str()), W = std::stod(costs[3].str());
  CHECK(F > 0);
  CHECK(B > 0);
  CHECK(W > 0);
  const double idle = F + B - W, zb_h1 = idle / (4 * (F + B + W) + idle);
  CHECK(table["zb-h1"].closed_form == Approx(zb_h1).margin(0.002));
  CHECK(std::stod(costs[4].str()) == Approx(zb_h1 / 0.2).margin(0.011));
}

TEST_CASE("bench pipeline --rounds with --stage-speeds is refused: the splits are compared in one round", "[bench]") {
  TempDir cwd;
  const ProcessResult result =
      run_troupe(cwd, {"bench", "pipeline", "--stage-speeds", "1,0.5", "--rounds", "2"}, std::chrono::seconds(30));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  CHECK(result.exit_code == 2);
  CHECK(result.err.find("--rounds excludes --stage-speeds") != std::string::npos);
}
