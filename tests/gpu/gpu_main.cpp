// The [gpu] suite's main. With a usable CUDA device it runs the selected test cases as Catch2
// does. Without one it runs none, prints "SKIPPED (no CUDA device): <name>" for each selected case
// and exits kSkipped, which ctest (SKIP_RETURN_CODE) reports as Skipped: a GPU test is never a
// silent pass on a machine that cannot run it. Cases tagged [multi-gpu] need two devices; with
// one they are reported skipped by name the same way.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "compute/cuda/device.hpp"
#include "gpu/skip_code.hpp"

namespace {

bool needs_two_devices(const Catch::TestCase& test) {
  const auto& tags = test.getTestCaseInfo().tags;
  return std::find(tags.begin(), tags.end(), "multi-gpu") != tags.end();
}

}  // namespace

int main(int argc, char** argv) {
  Catch::Session session;
  if (const int rc = session.applyCommandLine(argc, argv); rc != 0) return rc;
  const Catch::ConfigData& data = session.configData();
  if (data.listTests || data.listTestNamesOnly || data.listTags || data.listReporters) return session.run();
  const Catch::Config& config = session.config();
  const std::vector<Catch::TestCase> selected =
      Catch::filterTests(Catch::getAllTestCasesSorted(config), config.testSpec(), config);
  auto device = troupe::compute::cuda_device();
  if (!device) {
    for (const Catch::TestCase& test : selected) std::printf("SKIPPED (no CUDA device): %s\n", test.name.c_str());
    std::printf("(%s)\n", device.error().message.c_str());
    return troupe::tests::kSkipped;
  }
  int devices = 0;
  cudaGetDeviceCount(&devices);
  std::printf("[gpu] tests on %s (%d device(s))\n", device->c_str(), devices);
  const auto multi = std::count_if(selected.begin(), selected.end(), needs_two_devices);
  if (devices >= 2 || multi == 0) return session.run();
  for (const Catch::TestCase& test : selected)
    if (needs_two_devices(test))
      std::printf("SKIPPED (needs 2 CUDA devices, this machine has %d): %s\n", devices, test.name.c_str());
  if (multi == static_cast<long>(selected.size())) return troupe::tests::kSkipped;
  if (!data.testsOrTags.empty()) {
    std::printf("select the [multi-gpu] cases apart from the others on a machine with one device\n");
    return 2;
  }
  session.configData().testsOrTags = {"~[multi-gpu]"};
  session.useConfigData(session.configData());
  return session.run();
}
