// train.balance static as a user runs it: real node processes over loopback whose replicas take
// uneven shares of every step's global batch must train the weights of the even split, within the
// tolerance of a changed order of additions (docs/balance.md), and print the same losses.

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "compute/train/balance.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;
using Catch::Contains;

namespace {

constexpr long steps = 20;

// Every step's printed loss, by step (the first line of each, whichever rank printed it).
std::map<long, double> step_losses(const std::string& out) {
  std::map<long, double> losses;
  const std::regex line(R"(step +(\d+)/\d+ \| loss ([0-9.]+))");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it)
    losses.emplace(std::stol((*it)[1].str()), std::stod((*it)[2].str()));
  return losses;
}

struct BalanceRun {
  std::map<long, double> losses;
  double final_loss = 0, param_norm = 0;
  std::string out;
  long steps = 0;  // the steps it trained, each printing its loss
};

// A replica's 4 micro-batches a step: accumulated, or a pipeline's.
const std::vector<std::string> accumulated{"--train.grad_accum", "4"};
const std::vector<std::string> pipelined{"--train.grad_accum", "1", "--pipeline.microbatches", "4"};

BalanceRun run_job(const TempDir& dir, std::vector<std::string> args,
                   const std::vector<std::string>& micro_batches = accumulated, long run_steps = steps) {
  args = with(std::move(args), tiny_steps(run_steps));
  args = with(std::move(args), {"--train.batch_size", "2", "--train.seq_len", "32", "--train.log_every", "1"});
  args = with(std::move(args), micro_batches);
  const ProcessResult result = run_troupe(dir, args, std::chrono::seconds(120));
  INFO("stdout: " << result.out << "\nstderr: " << result.err);
  REQUIRE(result.exit_code == 0);
  return {step_losses(result.out), number_after(result.out, "final train loss"), number_after(result.out, "param norm"),
          result.out, run_steps};
}

// How close an uneven run must come to the even one (docs/balance.md's table): plain sums differ in
// float32's reordering only (every printed loss to its last digit); compressed sums round or
// approximate each replica's partial sum, and an uneven split's partial sums are other sums.
struct Tolerance {
  double param_norm = troupe::compute::reordered_sums_param_norm_tolerance, step_loss = 1e-4;
};
constexpr Tolerance compressed_sums{troupe::compute::compressed_sums_param_norm_tolerance, 2e-4};

// The uneven run against the even one: the same weights and printed losses within `tolerance`.
void check_same_training(const BalanceRun& even, const BalanceRun& uneven, const std::string& what,
                         Tolerance tolerance = {}) {
  INFO(what);
  std::printf("%s: param norm %.9g against the even split's %.9g, final loss %.4f against %.4f\n", what.c_str(),
              uneven.param_norm, even.param_norm, uneven.final_loss, even.final_loss);
  CHECK(uneven.param_norm == Approx(even.param_norm).epsilon(tolerance.param_norm));
  CHECK(uneven.final_loss == Approx(even.final_loss).epsilon(1e-4));
  REQUIRE(even.losses.size() == static_cast<std::size_t>(even.steps));
  REQUIRE(uneven.losses.size() == even.losses.size());
  for (const auto& [step, loss] : even.losses) {
    INFO("step " << step);
    CHECK(std::abs(uneven.losses.at(step) - loss) <= tolerance.step_loss + 1e-9);
  }
}

// A launcher that stops the node it starts for 20 ms of every 40 ms: half speed, as a shared or
// throttled machine runs. Hosts named other than localhost go through it.
const std::string slow_launcher =
    ": {host}; eval exec {command} & node=$!; "
    "(while kill -0 $node 2>/dev/null; do sleep 0.02; kill -STOP $node; sleep 0.02; kill -CONT $node; done) & "
    "wait $node";

// The changes of a dynamic run over 2 replicas, each logged once by rank 0 with the times it read.
int dynamic_changes(const BalanceRun& run) {
  const std::regex change(R"(balance dynamic: step (\d+): replica shares (\d+), (\d+) of 8 micro-batches \(times per )"
                          R"(micro-batch ([0-9.]+) s, ([0-9.]+) s\))");
  int changes = 0;
  for (auto it = std::sregex_iterator(run.out.begin(), run.out.end(), change); it != std::sregex_iterator();
       ++it, ++changes) {
    std::printf("%s\n", it->str().c_str());
    CHECK(std::stoi((*it)[2].str()) + std::stoi((*it)[3].str()) == 8);
    CHECK(std::stod((*it)[4].str()) > 0);
    CHECK(std::stod((*it)[5].str()) > 0);
  }
  return changes;
}

// Compressed sums against the even split with the same compression: each replica's partial sum is
// rounded (bf16) or approximated (PowerSGD) before the group's sum, and an uneven split's partial
// sums differ (docs/balance.md's tolerance for them). Node 1 runs at half speed
// under dynamic; the even and static runs need no slow node.
void check_compressed(const std::string& kind, const std::vector<std::string>& zero_stages) {
  TempDir dir;
  const std::string hosts = dir.write("hosts", "localhost slots=1\nlocalhost slots=1\n");
  const std::string slow_hosts = dir.write("slow_hosts", "localhost slots=1\nslowhost slots=1\n");
  const std::vector<std::string> job{"launch", "--hostfile", hosts, "--comm.compress", kind};
  const BalanceRun even = run_job(dir, job);
  const BalanceRun fixed = run_job(dir, with(job, {"--train.balance", "static", "--train.replica_speeds", "1,0.33"}));
  CHECK_THAT(fixed.out, Contains("balance static: replica shares 6, 2 of 8 micro-batches"));
  check_same_training(even, fixed, "dp 2, comm.compress " + kind + ", shares 6 + 2", compressed_sums);
  for (const std::string& zero : zero_stages) {
    const BalanceRun moving =
        run_job(dir, {"launch", "--hostfile", slow_hosts, "--launcher", slow_launcher, "--comm.compress", kind,
                      "--train.zero", zero, "--train.balance", "dynamic", "--train.balance_window", "2"});
    CHECK(dynamic_changes(moving) >= 1);
    check_same_training(even, moving, "dp 2, comm.compress " + kind + ", train.zero " + zero + ", dynamic shares",
                        compressed_sums);
  }
}

}  // namespace

TEST_CASE("train.balance static over 2 and 3 processes of unequal speeds trains the weights of the even split",
          "[dp][balance]") {
  TempDir dir;
  // dp 2, speeds from the key: 8 micro-batches a step as 6 + 2 instead of 4 + 4.
  const BalanceRun even2 = run_job(dir, {"train", "--workers", "2"});
  const BalanceRun uneven2 =
      run_job(dir, {"train", "--workers", "2", "--train.balance", "static", "--train.replica_speeds", "1,0.33"});
  CHECK_THAT(uneven2.out, Contains("balance static: replica shares 6, 2 of 8 micro-batches"));
  CHECK(occurrences(uneven2.out, "balance static: replica shares") == 1);
  CHECK_THAT(even2.out, !Contains("balance static"));
  check_same_training(even2, uneven2, "dp 2, shares 6 + 2");

  // dp 3, speeds from the host file: 12 micro-batches as 6 + 4 + 2 instead of 4 + 4 + 4.
  const std::string hosts =
      dir.write("hosts", "localhost slots=1\nlocalhost slots=1 speed=0.5\nlocalhost slots=1 speed=0.25\n");
  const BalanceRun even3 = run_job(dir, {"launch", "--hostfile", hosts});
  const BalanceRun uneven3 = run_job(dir, {"launch", "--hostfile", hosts, "--train.balance", "static"});
  CHECK_THAT(uneven3.out, Contains("balance static: replica shares 6, 4, 2 of 12 micro-batches"));
  check_same_training(even3, uneven3, "dp 3, shares 6 + 4 + 2");
}

TEST_CASE("train.balance static over 2 replicas of 2 tensor shards each trains the weights of the even split",
          "[dp][tp][balance]") {
  TempDir dir;
  // A node of 2 ranks a replica, the second at half speed: both shards of a replica take its share,
  // 8 micro-batches a step as 5 + 3 instead of 4 + 4.
  const std::string hosts = dir.write("hosts", "localhost slots=2\nlocalhost slots=2 speed=0.5\n");
  const std::vector<std::string> job{"launch", "--hostfile", hosts, "--tensor.shards", "2"};
  const BalanceRun even = run_job(dir, job);
  const BalanceRun uneven = run_job(dir, with(job, {"--train.balance", "static"}));
  CHECK_THAT(uneven.out, Contains("balance static: replica shares 5, 3 of 8 micro-batches"));
  CHECK(occurrences(uneven.out, "balance static: replica shares") == 1);
  check_same_training(even, uneven, "dp 2 x tp 2, shares 5 + 3");
}

TEST_CASE(
    "train.balance static and dynamic over 2 replicas of 2 context shards each train the weights of the even split, "
    "both shards of a replica taking its share",
    "[dp][cp][balance]") {
  TempDir dir;
  // A node of 2 ranks a replica, the second at half speed: 8 micro-batches a step as 5 + 3; dynamic
  // starts from the declared 6 + 2 and, the replicas running alike, moves towards even.
  const std::string hosts = dir.write("hosts", "localhost slots=2\nlocalhost slots=2 speed=0.5\n");
  const std::vector<std::string> job{"launch", "--hostfile", hosts, "--context.shards", "2"};
  const BalanceRun even = run_job(dir, job);
  const BalanceRun fixed = run_job(dir, with(job, {"--train.balance", "static"}));
  CHECK_THAT(fixed.out, Contains("balance static: replica shares 5, 3 of 8 micro-batches"));
  CHECK(occurrences(fixed.out, "balance static: replica shares") == 1);
  check_same_training(even, fixed, "dp 2 x cp 2, shares 5 + 3");
  const BalanceRun moving = run_job(
      dir, with(job, {"--train.balance", "dynamic", "--train.replica_speeds", "1,0.2", "--train.balance_window", "2"}));
  CHECK_THAT(moving.out, Contains("balance dynamic: replica shares 6, 2 of 8 micro-batches"));
  CHECK(dynamic_changes(moving) >= 1);
  check_same_training(even, moving, "dp 2 x cp 2, dynamic shares from 6 + 2");
}

// Under DiLoCo each island splits its own step over its replicas, by their speeds: the job's speeds
// list every replica, island by island. The islands' samples stay those of the even split, so each
// island's gradients are its even split's, summed in another order.
TEST_CASE(
    "train.balance static and dynamic inside DiLoCo islands: each island splits its step over its own replicas and "
    "the job trains the weights of the even split",
    "[dp][diloco][balance]") {
  TempDir dir;
  const std::vector<std::string> job{
      "train", "--workers", "4", "--train.sync", "diloco", "--train.islands", "2", "--train.diloco_steps", "5"};
  const BalanceRun even = run_job(dir, job);
  // Island 0's 8 micro-batches as 6 + 2, island 1's as 5 + 3; rank 0 announces island 0's.
  const BalanceRun fixed =
      run_job(dir, with(job, {"--train.balance", "static", "--train.replica_speeds", "1,0.33,1,0.5"}));
  CHECK_THAT(fixed.out, Contains("balance static: replica shares 6, 2 of 8 micro-batches") &&
                            Contains("diloco: outer step 4 after step 20"));
  check_same_training(even, fixed, "2 islands of dp 2, shares 6 + 2 and 5 + 3");
  const BalanceRun moving = run_job(dir, with(job, {"--train.balance", "dynamic", "--train.replica_speeds",
                                                    "1,0.2,1,0.2", "--train.balance_window", "2"}));
  CHECK_THAT(moving.out, Contains("balance dynamic: replica shares 6, 2 of 8 micro-batches"));
  CHECK(dynamic_changes(moving) >= 1);
  check_same_training(even, moving, "2 islands of dp 2, dynamic shares from 6 + 2");
}

TEST_CASE(
    "train.balance static over 2 replicas of 2 pipeline stages each trains the weights of the even split, "
    "each replica's pipeline running its share",
    "[dp][pp][balance]") {
  TempDir dir;
  // Both stages of a replica take its share: 8 micro-batches a step as 6 + 2 instead of 4 + 4, under
  // 1F1B and GPipe.
  for (const std::string schedule : {"1f1b", "gpipe"}) {
    const std::vector<std::string> job{"train", "--workers",           "4",     "--pipeline.stages",
                                       "2",     "--pipeline.schedule", schedule};
    const BalanceRun even = run_job(dir, job, pipelined);
    const BalanceRun uneven =
        run_job(dir, with(job, {"--train.balance", "static", "--train.replica_speeds", "1,0.33"}), pipelined);
    CHECK_THAT(uneven.out, Contains("balance static: replica shares 6, 2 of 8 micro-batches"));
    check_same_training(even, uneven, "dp 2 x pp 2 (" + schedule + "), shares 6 + 2");
  }
}

TEST_CASE(
    "train.balance dynamic moves shares to the faster of 2 and 3 processes and trains the weights of the even split",
    "[dp][balance]") {
  TempDir dir;
  // Node 1 runs at half speed through its launcher; the host name is not local, so the launcher starts it.
  const std::string hosts = dir.write("hosts", "localhost slots=1\nslowhost slots=1\n");
  const BalanceRun even = run_job(dir, {"launch", "--hostfile", hosts, "--launcher", slow_launcher});
  const BalanceRun dynamic = run_job(dir, {"launch", "--hostfile", hosts, "--launcher", slow_launcher,
                                           "--train.balance", "dynamic", "--train.balance_window", "2"});
  CHECK_THAT(dynamic.out, Contains("balance dynamic: replica shares 4, 4 of 8 micro-batches"));
  CHECK(dynamic_changes(dynamic) >= 1);
  check_same_training(even, dynamic, "dp 2, dynamic shares, node 1 at half speed");

  // dp 3, the last node slowed: 12 micro-batches move between three replicas.
  const std::string hosts3 = dir.write("hosts3", "localhost slots=1\nlocalhost slots=1\nslowhost slots=1\n");
  const BalanceRun even3 = run_job(dir, {"launch", "--hostfile", hosts3, "--launcher", slow_launcher});
  const BalanceRun dynamic3 = run_job(dir, {"launch", "--hostfile", hosts3, "--launcher", slow_launcher,
                                            "--train.balance", "dynamic", "--train.balance_window", "2"});
  CHECK_THAT(dynamic3.out, Contains("balance dynamic: replica shares 4, 4, 4 of 12 micro-batches"));
  CHECK(occurrences(dynamic3.out, " of 12 micro-batches (times per micro-batch ") >= 1);
  check_same_training(even3, dynamic3, "dp 3, dynamic shares, node 2 at half speed");
}

TEST_CASE(
    "train.balance dynamic moves the shares of replicas of pipeline stages or tensor shards at one step boundary on "
    "every rank, through an in-place recovery too, and trains the even split's weights",
    "[dp][pp][tp][balance]") {
  TempDir dir;
  // Dynamic shares start from the declared speeds, 6 + 2 of 8; the replicas run alike, so the first
  // window's times move the shares back towards even: every rank of a replica takes the new share
  // at the same step boundary, with a schedule, activation slots and micro-batch sums for it.
  const std::vector<std::string> dynamic{"--train.balance",        "dynamic", "--train.replica_speeds", "1,0.2",
                                         "--train.balance_window", "2"};
  const std::vector<std::pair<std::vector<std::string>, const std::vector<std::string>*>> layouts{
      {{"train", "--workers", "4", "--pipeline.stages", "2", "--pipeline.schedule", "1f1b"}, &pipelined},
      {{"train", "--workers", "4", "--pipeline.stages", "2", "--pipeline.schedule", "gpipe"}, &pipelined},
      {{"train", "--workers", "4", "--tensor.shards", "2"}, &accumulated}};
  for (const auto& [job, micro_batches] : layouts) {
    const BalanceRun even = run_job(dir, job, *micro_batches);
    const BalanceRun moving = run_job(dir, with(job, dynamic), *micro_batches);
    CHECK_THAT(moving.out, Contains("balance dynamic: replica shares 6, 2 of 8 micro-batches"));
    CHECK(dynamic_changes(moving) >= 1);
    check_same_training(even, moving, job[4] + " " + job.back() + ", dynamic shares from 6 + 2");
  }
  // Rank 3 (stage 1 of replica 1) throws in step 10 and is respawned in its process: every rank
  // goes back to the first shares and measures anew, and the weights stay the even split's.
  const std::string hosts = dir.write("hosts", "localhost slots=2\nthrowhost slots=2\n");
  const std::vector<std::string> pipeline{"launch", "--hostfile", hosts, "--pipeline.stages", "2"};
  const BalanceRun even = run_job(dir, with(pipeline, {"--launcher", ": {host}; eval exec {command}"}), pipelined);
  const BalanceRun recovered = run_job(
      dir,
      with(pipeline, with(dynamic, {"--launcher", ": {host}; export TROUPE_DRILL_THROW_AT=3:10; eval exec {command}",
                                    "--fault.heartbeat_timeout", "60"})),
      pipelined);
  CHECK_THAT(recovered.out, Contains("drill: injected failure in the worker of rank 3 at step 10") &&
                                Contains("balance dynamic: replica shares 6, 2 of 8 micro-batches after a recovery "
                                         "(the first shares, measuring anew)"));
  check_same_training(even, recovered, "dp 2 x pp 2, dynamic shares, rank 3 respawned in step 10");
}

// Under ZeRO-3 a replica runs its share's micro-batches as one batch, so every replica gathers and
// reduce-scatters each unit once a pass whatever its share (compute/train/trainer.hpp).
TEST_CASE(
    "train.balance static and dynamic under ZeRO-3: each replica runs its share as one batch, over 2 and 3 "
    "processes, context shards and DiLoCo islands, and trains the weights of the even split",
    "[dp][cp][diloco][balance][zero3]") {
  TempDir dir;
  const std::vector<std::string> zero3{"--train.zero", "3"};
  const BalanceRun even2 = run_job(dir, with({"train", "--workers", "2"}, zero3));
  const BalanceRun fixed2 = run_job(
      dir, with({"train", "--workers", "2", "--train.balance", "static", "--train.replica_speeds", "1,0.33"}, zero3));
  CHECK_THAT(fixed2.out, Contains("balance static: replica shares 6, 2 of 8 micro-batches"));
  check_same_training(even2, fixed2, "ZeRO-3, dp 2, shares 6 + 2");

  // Node 1 at half speed: dynamic moves micro-batches to node 0 from even shares.
  const std::string slow = dir.write("slow_hosts", "localhost slots=1\nslowhost slots=1\n");
  const BalanceRun moving2 = run_job(dir, with({"launch", "--hostfile", slow, "--launcher", slow_launcher,
                                                "--train.balance", "dynamic", "--train.balance_window", "2"},
                                               zero3));
  CHECK_THAT(moving2.out, Contains("balance dynamic: replica shares 4, 4 of 8 micro-batches"));
  CHECK(dynamic_changes(moving2) >= 1);
  // Node 0 waits for node 1's pieces of every unit in its passes; its speed leaves the waits out, so
  // the first change gives node 0 more, not the slow node.
  std::smatch first;
  REQUIRE(
      std::regex_search(moving2.out, first, std::regex(R"(balance dynamic: step \d+: replica shares (\d+), (\d+))")));
  CHECK(std::stoi(first[1].str()) > std::stoi(first[2].str()));
  check_same_training(even2, moving2, "ZeRO-3, dp 2, dynamic shares, node 1 at half speed");

  const BalanceRun even3 = run_job(dir, with({"train", "--workers", "3"}, zero3));
  const BalanceRun fixed3 = run_job(
      dir,
      with({"train", "--workers", "3", "--train.balance", "static", "--train.replica_speeds", "1,0.5,0.25"}, zero3));
  CHECK_THAT(fixed3.out, Contains("balance static: replica shares 6, 4, 2 of 12 micro-batches"));
  check_same_training(even3, fixed3, "ZeRO-3, dp 3, shares 6 + 4 + 2");

  // Both context shards of a replica run its share as one batch, each its rows of it.
  const std::vector<std::string> context{"train", "--workers", "4", "--context.shards", "2", "--train.zero", "3"};
  const BalanceRun even_cp = run_job(dir, context);
  const BalanceRun moving_cp = run_job(dir, with(context, {"--train.balance", "dynamic", "--train.replica_speeds",
                                                           "1,0.2", "--train.balance_window", "2"}));
  CHECK_THAT(moving_cp.out, Contains("balance dynamic: replica shares 6, 2 of 8 micro-batches"));
  check_same_training(even_cp, moving_cp, "ZeRO-3, dp 2 x cp 2, dynamic shares from 6 + 2");

  // Each island's replicas split its step, each running its share as one batch.
  const std::vector<std::string> islands{"train",  "--workers",       "4", "--train.sync",
                                         "diloco", "--train.islands", "2", "--train.diloco_steps",
                                         "5",      "--train.zero",    "3"};
  const BalanceRun even_islands = run_job(dir, islands);
  const BalanceRun fixed_islands =
      run_job(dir, with(islands, {"--train.balance", "static", "--train.replica_speeds", "1,0.33,1,0.5"}));
  CHECK_THAT(fixed_islands.out, Contains("balance static: replica shares 6, 2 of 8 micro-batches"));
  check_same_training(even_islands, fixed_islands, "ZeRO-3, 2 islands of dp 2, shares 6 + 2 and 5 + 3");
}

// On pipeline stages and tensor shards each replica runs its share micro-batch by micro-batch, and
// every unit stays gathered for the step, its gradient reduce-scattered once after the last backward
// (ShardedParameters::hold_for_step).
TEST_CASE(
    "train.balance static and dynamic under ZeRO-3 on pipeline stages and tensor shards: each unit gathered once a "
    "step whatever the share, and the weights of the even split",
    "[dp][pp][tp][balance][zero3]") {
  TempDir dir;
  const std::vector<std::string> fixed{"--train.balance", "static", "--train.replica_speeds", "1,0.33"};
  const std::vector<std::string> moving{"--train.balance",        "dynamic", "--train.replica_speeds", "1,0.2",
                                        "--train.balance_window", "2"};
  const std::vector<std::string> stages{"train", "--workers", "4", "--pipeline.stages", "2", "--train.zero", "3"};
  for (const std::vector<std::string>& schedule :
       {std::vector<std::string>{"--pipeline.schedule", "1f1b"},
        std::vector<std::string>{"--pipeline.schedule", "zb-v", "--pipeline.virtual_stages", "2"}}) {
    const std::vector<std::string> job = with(stages, schedule);
    const BalanceRun even = run_job(dir, job, pipelined);
    const BalanceRun uneven = run_job(dir, with(job, fixed), pipelined);
    CHECK_THAT(uneven.out, Contains("balance static: replica shares 6, 2 of 8 micro-batches"));
    check_same_training(even, uneven, "ZeRO-3, dp 2 x pp 2 (" + schedule[1] + "), shares 6 + 2");
    const BalanceRun dynamic = run_job(dir, with(job, moving), pipelined);
    CHECK(dynamic_changes(dynamic) >= 1);
    check_same_training(even, dynamic, "ZeRO-3, dp 2 x pp 2 (" + schedule[1] + "), dynamic shares from 6 + 2");
  }
  const std::vector<std::string> shards{"train", "--workers", "4", "--tensor.shards", "2", "--train.zero", "3"};
  const BalanceRun even = run_job(dir, shards);
  const BalanceRun uneven = run_job(dir, with(shards, fixed));
  CHECK_THAT(uneven.out, Contains("balance static: replica shares 6, 2 of 8 micro-batches"));
  check_same_training(even, uneven, "ZeRO-3, dp 2 x tp 2, shares 6 + 2");
  const BalanceRun dynamic = run_job(dir, with(shards, moving));
  CHECK(dynamic_changes(dynamic) >= 1);
  check_same_training(even, dynamic, "ZeRO-3, dp 2 x tp 2, dynamic shares from 6 + 2");
}

TEST_CASE(
    "train.balance static and dynamic with bf16 gradient sums, dynamic under ZeRO 1 and 2, train the weights "
    "of the even split",
    "[dp][balance]") {
  check_compressed("bf16", {"1", "2"});
}

TEST_CASE("train.balance static and dynamic with PowerSGD gradient sums train the weights of the even split",
          "[dp][balance][slow]") {
  check_compressed("powersgd", {"0"});
}

TEST_CASE(
    "train.balance dynamic through an in-place recovery: the survivor keeps its measured speed, the new worker "
    "starts at the mean share, and the weights stay the even split's",
    "[dp][balance]") {
  TempDir dir;
  // Node 1 at half speed; its worker throws in step 10, as troupe drill kill-worker makes it, and is
  // respawned in its process with its state from rank 0.
  const std::string hosts = dir.write("hosts", "localhost slots=1\nslowhost slots=1\n");
  const BalanceRun even =
      run_job(dir, {"launch", "--hostfile", dir.write("even_hosts", "localhost slots=1\nlocalhost slots=1\n")});
  const BalanceRun dynamic =
      run_job(dir, {"launch", "--hostfile", hosts, "--launcher", "export TROUPE_DRILL_THROW_AT=1:10; " + slow_launcher,
                    "--train.balance", "dynamic", "--train.balance_window", "2", "--fault.heartbeat_timeout", "60"});
  CHECK_THAT(dynamic.out, Contains("drill: injected failure in the worker of rank 1 at step 10"));
  std::smatch resumed;
  REQUIRE(std::regex_search(dynamic.out, resumed,
                            std::regex(R"(balance dynamic: step (\d+): replica shares (\d+), (\d+) of 8 micro-batches )"
                                       R"(after a recovery)")));
  std::printf("%s\n", resumed.str().c_str());
  CHECK(std::stol(resumed[1].str()) >= 10);
  // The new worker is taken at the survivor's time per micro-batch, the mean of the others: even.
  CHECK(resumed[2].str() == "4");
  CHECK(resumed[3].str() == "4");
  check_same_training(even, dynamic, "dp 2, dynamic shares, worker 1 respawned in step 10");
}

TEST_CASE(
    "a drained replica grows back in place under train.balance static and dynamic, the shares split again over the "
    "grown replicas, and the weights stay the even split's",
    "[dp][balance][drill]") {
  TempDir dir;
  // Steps of tiny take tens of milliseconds: with 20 the survivor could reach the job's last step
  // before the shell's rejoin, which the job then refuses ("the job is in its last step").
  const long grow_steps = 40;
  const BalanceRun even = run_job(dir, {"train", "--workers", "2"}, accumulated, grow_steps);
  // troupe drill grow: node 1 drained after step 5 (the job restarts as one replica of all 8
  // micro-batches), two steps without it, then the shell's rejoin grows the job in place.
  auto grown = [&](const std::string& name, const std::vector<std::string>& balance) {
    const std::filesystem::path folder = dir.path() / name;
    std::vector<std::string> args{"drill", "grow", "--keep", "--dir", folder.string(), "--at-step", "5"};
    args = with(with(std::move(args), tiny_steps(grow_steps)), balance);
    args = with(std::move(args), {"--train.batch_size", "2", "--train.seq_len", "32", "--train.log_every", "1"});
    const ProcessResult r = run_troupe(dir, with(std::move(args), accumulated), std::chrono::seconds(240));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    // The events the drill read, so a failed verdict can be read against them.
    INFO("drilled.events: " << (std::filesystem::exists(folder / "drilled.events")
                                    ? file_text(folder / "drilled.events")
                                    : std::string("(none)")));
    REQUIRE(r.exit_code == 0);
    CHECK_THAT(r.out,
               Contains("grown in place: yes") && Contains("survivors kept their processes through the grow: yes"));
    // The drill itself compares the final weights within the tolerance of uneven shares.
    CHECK(std::regex_search(r.out, std::regex("\n  final weights equal to an undisturbed run: yes \\(parameter norm "
                                              "[0-9.]+ against [0-9.]+, [0-9.e+-]+ relative, within 1e-06: uneven "
                                              "shares sum the gradients in another order\\)\n")));
    CHECK_THAT(r.out, Contains("verdict: PASS"));
    const std::string log = file_text(folder / "drilled.log");
    CHECK_THAT(log, !Contains("restarting every node with the nodes the job went on without"));
    return BalanceRun{step_losses(log), number_after(log, "final train loss"), number_after(log, "param norm"), log,
                      grow_steps};
  };
  const BalanceRun fixed = grown("static", {"--train.balance", "static", "--train.replica_speeds", "1,0.33"});
  // Split by the speeds before the drain, all 8 on the one replica left, and by them again once grown.
  const std::string split = "balance static: replica shares 6, 2 of 8 micro-batches";
  CHECK(occurrences(fixed.out, split) == 2);
  CHECK(fixed.out.find("balance static: replica shares 8 of 8 micro-batches") < fixed.out.rfind(split));
  check_same_training(even, fixed, "dp 2 drained to 1 and grown back in place, static shares 6 + 2");

  // Dynamic: the survivor measured its speed while alone; the grown replica starts at its mean.
  const BalanceRun moving = grown("dynamic", {"--train.balance", "dynamic", "--train.balance_window", "2"});
  CHECK_THAT(moving.out, Contains("balance dynamic: replica shares 8 of 8 micro-batches") &&
                             Contains("replica shares 4, 4 of 8 micro-batches after a recovery (the survivors' "
                                      "measured speeds, a new replica at their mean)"));
  check_same_training(even, moving, "dp 2 drained to 1 and grown back in place, dynamic shares");
}

// Dynamic shares follow measured times, which a fault changes: the drill compares the final weights
// within the tolerance of reordered sums, not bit for bit. Under ZeRO-3 no replica holds a lost
// shard, so the recovery rolls every rank back to the newest checkpoint in place.
TEST_CASE(
    "drill kill-worker under train.balance dynamic and ZeRO-3: rolled back in place, shares resumed, and the final "
    "weights within the tolerance of reordered sums",
    "[dp][balance][zero3][drill]") {
  TempDir dir;
  std::vector<std::string> args{"drill", "kill-worker", "--keep", "--dir", (dir.path() / "drill").string(), "--at-step",
                                "6"};
  args = with(with(std::move(args), tiny_steps(16)), accumulated);
  args = with(std::move(args),
              {"--workers", "2", "--train.batch_size", "2", "--train.seq_len", "32", "--train.zero", "3",
               "--train.balance", "dynamic", "--train.replica_speeds", "1,0.33", "--train.balance_window", "2"});
  const ProcessResult r = run_troupe(dir, args, std::chrono::seconds(240));
  INFO("stdout: " << r.out << "\nstderr: " << r.err);
  CHECK(r.exit_code == 0);
  CHECK_THAT(r.out, Contains("recovery: in place by rollback to checkpoint step") && Contains("verdict: PASS"));
  CHECK(std::regex_search(r.out, std::regex("\n  final weights equal to an undisturbed run: yes \\(parameter norm "
                                            "[0-9.]+ against [0-9.]+, [0-9.e+-]+ relative, within 1e-06: uneven "
                                            "shares sum the gradients in another order\\)\n")));
}

TEST_CASE("train.balance static refuses in one line what it does not support yet, and speeds that cannot apply",
          "[dp][balance][cli]") {
  TempDir dir;
  const std::vector<std::string> job = with({"train", "--workers", "2"}, tiny_steps(2));
  check_rejected_in(dir,
                    with(job, {"--train.balance", "dynamic", "--pipeline.stages", "2", "--pipeline.schedule",
                               "interleaved", "--pipeline.virtual_stages", "2", "--pipeline.microbatches", "4"}),
                    "train.balance dynamic does not work with pipeline.schedule interleaved: its shares move by one "
                    "micro-batch");
  // Interleaving needs a multiple of the stages: shares 5 + 3 of 8 cannot be interleaved over 2.
  check_rejected_in(dir,
                    with({"train", "--workers", "4"},
                         with(tiny_steps(2), {"--train.balance", "static", "--train.replica_speeds", "1,0.6",
                                              "--pipeline.stages", "2", "--pipeline.schedule", "interleaved",
                                              "--pipeline.virtual_stages", "2", "--pipeline.microbatches", "4"})),
                    "train.balance static: replica 0's share of 5 micro-batches: pipeline schedule ");
  check_rejected_in(dir, with(job, {"--train.balance", "static", "--train.zero", "3", "--model.preset", "moe-tiny"}),
                    "train.balance static does not work with train.zero 3 on a model with experts");
  check_rejected_in(dir, with(job, {"--train.balance", "fast"}), "train.balance");
  check_rejected_in(dir, with(job, {"--train.replica_speeds", "1,0.5"}),
                    "train.replica_speeds '1,0.5' needs train.balance static or dynamic");
  check_rejected_in(dir, with(job, {"--train.balance", "static", "--train.replica_speeds", "1,0"}),
                    "train.replica_speeds '1,0': every speed must be a positive number");
  check_rejected_in(dir, with(job, {"--train.balance", "static", "--train.replica_speeds", "1,x"}),
                    "train.replica_speeds: 'x' in '1,x' is not a number (write one speed a replica");
  check_rejected_in(dir, with(job, {"--train.balance", "static", "--train.replica_speeds", "1,1,1"}),
                    "train.replica_speeds '1,1,1' lists 3 speeds for the job's 2 data-parallel replicas");
  const std::string hosts = dir.write("hosts", "localhost slots=1\nlocalhost slots=1 speed=half\n");
  check_rejected_in(dir, with({"launch", "--hostfile", hosts}, tiny_steps(2)),
                    hosts + ":2: speed must be a positive number, got 'half'");
}
