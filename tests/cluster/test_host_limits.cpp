// A host's kernel limits as a job meets them: System V shared memory segments (kernel.shmmni),
// which a simulated rank's comm engine takes two of (comm/sysv_segments.hpp). Each case makes a
// private IPC namespace with a small limit, so the machine's own stays as it is.

#include <catch2/catch.hpp>

#include <chrono>
#include <string>

#include "apps/run_troupe.hpp"
#include "support/run_process.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;

TEST_CASE(
    "sim ranks past a host's System V segment limit: the launch refuses them in one line, a node that meets "
    "the limit names it",
    "[cluster][sim][cli]") {
  TempDir dir;
  const std::string hosts = dir.write("hosts", "localhost slots=32\nlocalhost slots=32\n");
  const std::string job = std::string(TROUPE_BINARY_DIR "/troupe") + " launch --hostfile " + hosts +
                          " --model.preset nano --train.backend sim --train.steps 2 --train.batch_size 1"
                          " --train.val_every 0 --train.val_batches 1";
  // 100 segments where 64 ranks, and a node process of 32 of them started again, take 192.
  const auto with_100_segments = [&](const std::string& line) {
    return run_process(
        {"/usr/bin/unshare", "--ipc", "/bin/sh", "-c", "echo 100 > /proc/sys/kernel/shmmni && exec " + line},
        dir.path().string(), std::chrono::seconds(60));
  };

  const ProcessResult refused = with_100_segments(job);
  INFO("stderr: " << refused.err);
  REQUIRE(!refused.timed_out);
  CHECK(refused.exit_code == 2);
  CHECK(refused.err == "troupe: error: " + hosts +
                           ": 64 simulated ranks on this machine take 192 System V shared memory segments (2 a rank, "
                           "and as many for the 32 ranks of a node process started again in place), but "
                           "kernel.shmmni allows 100 and 0 are in use: raise it (sysctl -w kernel.shmmni=256) or put "
                           "fewer ranks on this machine\n");

  // With UCX's transports chosen by the user the launch cannot count; a node's engine that finds
  // the segments taken says so instead of UCX's bare "Out of memory".
  const ProcessResult failed = with_100_segments("env UCX_TLS=sysv " + job);
  INFO("stderr: " << failed.err);
  REQUIRE(!failed.timed_out);
  CHECK(failed.exit_code != 0);
  CHECK_THAT(failed.err, Contains("comm: cannot create the UCX worker: "));
  CHECK_THAT(failed.err, Contains(" of kernel.shmmni's 100 in use) and a simulated rank's worker takes 2: raise "
                                  "kernel.shmmni or put fewer ranks on this host"));
}
