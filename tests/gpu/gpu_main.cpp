// The [gpu] suite's main. With a usable CUDA device it runs the selected test cases as Catch2
// does. Without one it runs none, prints "SKIPPED (no CUDA device): <name>" for each selected case
// and exits kSkipped, which ctest (SKIP_RETURN_CODE) reports as Skipped: a GPU test is never a
// silent pass on a machine that cannot run it.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>

#include "compute/cuda/device.hpp"
#include "gpu/skip_code.hpp"

int main(int argc, char** argv) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  const Catch::ConfigData& data = session.configData();
  if (data.listTests || data.listTestNamesOnly || data.listTags || data.listReporters) return session.run();
  auto device = troupe::compute::cuda_device();
  if (device) {
    std::printf("[gpu] tests on %s\n", device->c_str());
    return session.run();
  }
  const Catch::Config& config = session.config();
  for (const Catch::TestCase& test : Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config))
    std::printf("SKIPPED (no CUDA device): %s\n", test.name.c_str());
  std::printf("(%s)\n", device.error().message.c_str());
  return troupe::tests::kSkipped;
}
