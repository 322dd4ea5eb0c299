// The [cluster] suite's main. Its cases run jobs across hosts simulated as network namespaces
// (scripts/netns-cluster.sh), which needs root and `ip netns`. Where either is missing it runs none,
// prints "SKIPPED (needs root and ip netns): <name>" for each selected case and exits 77, which
// ctest (SKIP_RETURN_CODE) reports as Skipped: never a silent pass on a machine that cannot run it.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "support/run_process.hpp"

namespace {

constexpr int kSkipped = 77;

// Why this machine cannot hold the simulated hosts; empty when it can.
std::string missing_requirement() {
  if (geteuid() != 0) return "not root";
  const auto listed = troupe::test::run_process({"/bin/sh", "-c", "ip netns list && command -v unshare nsenter tc"},
                                                "/", std::chrono::seconds(10));
  if (listed.exit_code != 0) return "`ip netns list`, unshare, nsenter or tc failed: " + listed.err;
  return {};
}

}  // namespace

int main(int argc, char** argv) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  const Catch::ConfigData& data = session.configData();
  if (data.listTests || data.listTestNamesOnly || data.listTags || data.listReporters) return session.run();
  if (const std::string missing = missing_requirement(); !missing.empty()) {
    const Catch::Config& config = session.config();
    for (const Catch::TestCase& test : Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config))
      std::printf("SKIPPED (needs root and ip netns): %s\n", test.name.c_str());
    std::printf("(%s)\n", missing.c_str());
    return kSkipped;
  }
  return session.run();
}
