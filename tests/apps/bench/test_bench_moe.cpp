// troupe bench moe at its smallest: moe-tiny, one measured iteration, short balance runs. The
// exchange's bus bandwidths are what its times and bytes say, the scaling is the tokens/s ratio it
// is defined as, and the loads lie between even (1) and every slot on one expert (E).

#include <catch2/catch.hpp>

#include <cmath>
#include <regex>
#include <string>

#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

namespace {

double figure(const std::string& out, const std::string& pattern) {
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex(pattern)));
  return std::stod(m[1].str());
}

}  // namespace

TEST_CASE("bench moe prints the all-to-all against the all-reduce, tokens/s with expert shards and the load balance",
          "[bench][moe]") {
  TempDir cwd;
  const ProcessResult result = run_troupe(cwd,
                                          {"bench", "moe", "--model", "moe-tiny", "--batch", "2", "--shards", "2",
                                           "--steps", "1", "--warmup", "0", "--balance-steps", "4"},
                                          std::chrono::seconds(180));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(!result.timed_out);
  REQUIRE(result.exit_code == 0);

  // moe-tiny: 4 experts, top-2, n_embd 128, seq 128: micro-batch 2 is 512 slots' rows of 128 floats.
  const double mib = figure(result.out, R"(exchange of ([0-9.]+) MiB a rank)");
  CHECK(mib == Approx(2.0 * 128 * 2 * 128 * 4 / (1024.0 * 1024.0)).epsilon(0.01));
  const double a2a_ms = figure(result.out, R"(all-to-all +([0-9.]+) )");
  const double a2a_bus = figure(result.out, R"(all-to-all +[0-9.]+ +([0-9.]+))");
  const double ar_ms = figure(result.out, R"(all-reduce +([0-9.]+) )");
  const double ar_bus = figure(result.out, R"(all-reduce +[0-9.]+ +([0-9.]+))");
  const double bytes = mib * 1024 * 1024;
  CHECK(a2a_bus == Approx(0.5 * bytes / (a2a_ms * 1e-3) / 1e9).epsilon(0.05).margin(0.002));
  CHECK(ar_bus == Approx(bytes / (ar_ms * 1e-3) / 1e9).epsilon(0.05).margin(0.002));

  const double alone = figure(result.out, R"(1 process +([0-9.]+))");
  const double group = figure(result.out, R"(expert shards 2 +([0-9.]+))");
  const double scaling = figure(result.out, R"(scaling ([0-9.]+))");
  CHECK(alone > 0);
  CHECK(scaling == Approx(group / (2 * alone)).epsilon(0.02));

  for (const char* run : {R"(aux coefficient 0\.01 +([0-9.]+))", R"(aux coefficient 0 +([0-9.]+))"}) {
    const double load = figure(result.out, run);
    CHECK((load >= 1.0 && load <= 4.0));
  }
}
