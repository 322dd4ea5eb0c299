// Checkpoints of a run on the GPU: the state goes through host mirrors, so a worker that fails
// after a checkpoint is restarted from it (no rescue snapshot on a GPU) and the run ends where an
// undisturbed one does.

#include <catch2/catch.hpp>

#include <chrono>
#include <fstream>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

namespace troupe::tests {
namespace {

using namespace std::chrono_literals;
using troupe::test::number_after;

// One node process (a host file of one line: `troupe train --workers 1` would train in-process,
// where nothing restarts).
std::vector<std::string> gpu_job(const troupe::test::TempDir& dir, const std::string& checkpoints) {
  std::ofstream(dir.path() / "hosts") << "localhost slots=1\n";
  return {"launch",         "--hostfile",       (dir.path() / "hosts").string(), "--model.preset", "tiny",
          "--train.steps",  "6",                "--train.val_batches", "1",      "--sample.tokens", "0",
          "--train.backend", "cuda",            "--checkpoint.dir", checkpoints,  "--checkpoint.every", "3"};
}

}  // namespace

TEST_CASE("a gpu worker that fails after a checkpoint restarts from it and ends as an undisturbed run", "[gpu]") {
  troupe::test::TempDir dir;
  const auto straight = troupe::test::run_troupe(dir, gpu_job(dir, (dir.path() / "straight").string()), 180s);
  INFO("undisturbed: " << straight.out << straight.err);
  REQUIRE(straight.exit_code == 0);

  std::vector<std::string> failing{"/usr/bin/env", "TROUPE_DRILL_THROW_AT=0:5", TROUPE_BINARY_DIR "/troupe"};
  const auto job = gpu_job(dir, (dir.path() / "failing").string());
  failing.insert(failing.end(), job.begin(), job.end());
  const auto restarted = troupe::test::run_process(failing, dir.path().string(), 180s);
  INFO("failing: " << restarted.out << restarted.err);
  REQUIRE(restarted.exit_code == 0);
  CHECK_THAT(restarted.out + restarted.err, Catch::Contains("no rescue: the state is in GPU memory"));
  CHECK_THAT(restarted.out + restarted.err, Catch::Contains("after step 3"));
  // The token-embedding gradient is summed with atomics on the device: the last bits may differ.
  CHECK(number_after(restarted.out, "param norm") == Approx(number_after(straight.out, "param norm")).epsilon(1e-5));
}

}  // namespace troupe::tests
