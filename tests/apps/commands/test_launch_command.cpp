// troupe launch / troupe train --workers N, as far as its own options go: a fault.rescue_timeout
// the rescue's waits cannot be derived from, more workers than this machine's cores can run, and
// data a node would refuse are all refused before any node starts, with one line; and the restart
// loop's view of the checkpoint folder: a failure that repeats with no newer checkpoint stops the
// job. The loop's decisions are pinned by tests/actors/supervision/test_restart_policy.cpp, and end
// to end by the drills (test_drill.cpp).

#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <chrono>
#include <cstdint>
#include <vector>

#include "apps/run_troupe.hpp"
#include "support/scoped_env.hpp"
#include "compute/data/token_file.hpp"

using namespace troupe::test;
using Catch::Contains;

TEST_CASE("a fault.rescue_timeout outside 1 to 3600 seconds is refused with one line", "[cli]") {
  TempDir dir;
  check_rejected_in(dir, {"train", "--workers", "2", "--fault.rescue_timeout", "0"},
                    "fault.rescue_timeout must be between 1 and 3600 seconds, got 0.0");
  const std::string hosts = dir.write("hosts", "localhost slots=2\n");
  check_rejected_in(dir, {"launch", "--hostfile", hosts, "--fault.rescue_timeout=-5"},
                    "fault.rescue_timeout must be between 1 and 3600 seconds, got -5.0");
}

TEST_CASE("a failure that repeats with no checkpoint written stops the job after one restart, not fault.max_restarts",
          "[recovery]") {
  TempDir dir;
  // Rank 1 throws in step 3 of every run that starts from scratch, and the only checkpoint is the
  // last step's: no attempt gets further than the one before. train.zero 1 rules out a rescue
  // snapshot, which would be a newer place to start from.
  const ProcessResult r = run_process(
      {"/usr/bin/env", "TROUPE_DRILL_THROW_AT=1:3", TROUPE_BINARY_DIR "/troupe", "train", "--workers", "2",
       "--model.preset", "tiny", "--train.steps", "6", "--train.threads", "1", "--train.val_batches", "1",
       "--train.val_every", "0", "--sample.tokens", "0", "--train.zero", "1", "--checkpoint.every", "0",
       "--checkpoint.dir", (dir.path() / "ckpt").string(), "--fault.max_restarts", "3"},
      dir.path().string(), std::chrono::seconds(180));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(!r.timed_out);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.err, Contains("troupe: error: ") && Contains("drill: injected failure in the worker of rank 1 at step 3") &&
                        Contains("(after 1 restart(s); the same failure again, and no checkpoint was written: another "
                                 "restart would repeat it)"));
  CHECK(r.err.find("troupe: error: ") == r.err.rfind("troupe: error: "));
  CHECK_THAT(r.out, Contains("(restart 1 of 3)") && !Contains("(restart 2 of 3)") &&
                        Contains("stopping the job: restarts=1 failure.worker_exception=2 recovery.checkpoint=1"));
}

TEST_CASE("a host file asking more workers of this machine than its cores can run is refused with one line", "[cli]") {
  TempDir dir;
  const std::string hosts = dir.write("hosts", "localhost slots=65536\n");
  check_rejected_in(dir, {"launch", "--hostfile", hosts}, hosts + ": 65536 workers on this machine, but its");
}

TEST_CASE("a token outside the vocabulary is refused with the same one line with and without workers", "[cli]") {
  TempDir dir;
  std::vector<std::uint16_t> tokens(4096, 7);
  tokens[1000] = 300;
  const std::string path = dir.file("tokens.bin");
  REQUIRE(troupe::compute::write_token_file(path, tokens).ok());
  const std::string expected = "troupe: error: " + path +
                               ": token id 300 at position 1000 is outside the vocabulary of 256 tokens (ids 0..255)\n";
  for (const std::vector<std::string>& start : {std::vector<std::string>{"train"},
                                                std::vector<std::string>{"train", "--workers", "2"}}) {
    std::vector<std::string> args = start;
    args.insert(args.end(), {"--model.preset", "tiny", "--data.train_tokens", path});
    const ProcessResult refused = check_rejected_in(dir, args, "token id 300");
    CHECK(refused.err == expected);
  }
}

TEST_CASE("a device or a pipe given as data is refused with one line, with and without workers", "[cli]") {
  TempDir dir;
  const std::string fifo = dir.file("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases{
      {{"--data.corpus", "/dev/zero"}, "text corpus '/dev/zero': is a character device, not a regular file or a directory"},
      {{"--data.corpus", fifo}, "text corpus '" + fifo + "': is a FIFO (named pipe), not a regular file or a directory"},
      {{"--data.train_tokens", "/dev/zero"}, "token file '/dev/zero': is a character device, not a regular file"}};
  for (const auto& [data, expected] : cases) {
    for (const std::vector<std::string>& start : {std::vector<std::string>{"train"},
                                                  std::vector<std::string>{"train", "--workers", "2"}}) {
      std::vector<std::string> args = start;
      args.insert(args.end(), {"--model.preset", "tiny"});
      args.insert(args.end(), data.begin(), data.end());
      check_rejected_in(dir, args, expected);
    }
  }
}

TEST_CASE("launch without a host file outside a Slurm allocation, or with a broken allocation, is refused with one "
          "line",
          "[cli]") {
  TempDir dir;
  troupe::test::ScopedEnv outside("SLURM_JOB_NODELIST", nullptr);
  check_rejected_in(dir, {"launch", "--model.preset", "tiny"},
                    "troupe launch needs --hostfile FILE, or to run inside a Slurm allocation (SLURM_JOB_NODELIST)");
  troupe::test::ScopedEnv inside("SLURM_JOB_NODELIST", "n[1-2]");
  troupe::test::ScopedEnv tasks("SLURM_TASKS_PER_NODE", "2(x3)");
  troupe::test::ScopedEnv per_node("SLURM_NTASKS_PER_NODE", nullptr);
  check_rejected_in(dir, {"launch", "--model.preset", "tiny"},
                    "SLURM_TASKS_PER_NODE '2(x3)' does not give one count per node of the 2 in the node list");
}

TEST_CASE("troupe node under srun or torchrun takes its rank, world and job address from their variables", "[cli]") {
  TempDir dir;
  troupe::test::ScopedEnv no_rank("RANK", nullptr), no_world("WORLD_SIZE", nullptr), no_index("TROUPE_NODE_INDEX", nullptr),
      no_slots("TROUPE_SLOTS", nullptr), no_join("TROUPE_JOIN", nullptr);
  troupe::test::ScopedEnv token("TROUPE_TOKEN", "a-token");
  troupe::test::ScopedEnv address("MASTER_ADDR", "127.0.0.1");
  troupe::test::ScopedEnv port("MASTER_PORT", "1");  // nothing listens on port 1
  {
    troupe::test::ScopedEnv rank("SLURM_PROCID", "5");
    troupe::test::ScopedEnv world("SLURM_NTASKS", "2");
    check_rejected_in(dir, {"node", "--model.preset", "tiny"}, "TROUPE_SLOTS 1 with RANK 5 does not fit WORLD_SIZE 2");
  }
  troupe::test::ScopedEnv rank("SLURM_PROCID", "1");
  troupe::test::ScopedEnv world("SLURM_NTASKS", "2");
  const auto started = std::chrono::steady_clock::now();
  const ProcessResult joined =
      run_troupe(dir, {"node", "--model.preset", "tiny", "--train.threads", "1", "--join-timeout", "1"});
  INFO(joined.out << joined.err);
  CHECK(joined.exit_code == 1);
  CHECK_THAT(joined.err, Catch::Contains("cannot reach the job at 127.0.0.1:1"));
  // A rank that srun starts beside the job may come first: it keeps trying for --join-timeout.
  CHECK(std::chrono::steady_clock::now() - started >= std::chrono::seconds(1));
}
