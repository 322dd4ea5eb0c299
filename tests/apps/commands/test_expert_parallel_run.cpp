// troupe train with expert shards (docs/moe.md, "Expert parallelism"): two workers splitting
// moe-tiny's experts, each holding only its own, print the losses of two plain data-parallel workers
// (four workers in groups of 2 and of 4 those of four); a checkpoint they write resumes without
// expert shards, and one of groups of 2 resumes in groups of 4, then without; a worker that throws
// recovers in place with its state from the rank holding its experts; two pipeline stages of two
// replicas in expert groups print one process's losses over 20 steps (under 1F1B, GPipe and
// interleaved schedules; ZeRO-3 without expert shards), and their checkpoint resumes in one process; two
// stages, and two stages of two replicas in expert groups of 2, under the zero-bubble schedules ZB-H1
// and ZB-V print one process's losses and param norm; under ZeRO 1 and 2
// they print ZeRO 0's losses and final parameter norm, and a ZeRO-2 checkpoint resumes in other groups and stages
// (one of two interleaved chunks a pipeline rank too);
// under bf16 and PowerSGD sums they train as the same compression without expert shards, and a PowerSGD checkpoint
// resumes in its layout and without expert shards (two pipeline stages of four replicas too, whose ranks write
// zeros as the residuals of the experts they do not hold after a resume from a checkpoint without expert shards); under
// ZeRO-3 two and four workers in expert groups of 2 print one process's losses and param norm and their checkpoint
// resumes in one process, also on two pipeline stages of four replicas in expert groups of 2 and of 4 (resumed in
// one process and in groups of 4); two tensor shards of replicas in expert groups print one process's losses and
// param norm (under ZeRO-3, with sequence parallelism under full recompute, and on two pipeline stages too), and
// their ZeRO-3 checkpoint resumes in one process; a
// layout whose expert groups do not fit is refused in one line.

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>
#include <vector>

#include "apps/checkpoint_parameters.hpp"
#include "apps/run_troupe.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"
#include "support/scoped_env.hpp"

using namespace troupe::test;

namespace {

constexpr int kExpertSteps = 4;

std::vector<std::string> moe_steps(int steps) {
  return {"--model.preset",     "moe-tiny", "--train.steps",    std::to_string(steps), "--train.batch_size", "2",
          "--train.seq_len",    "64",       "--train.val_every", "0",                  "--train.val_batches", "1",
          "--sample.tokens",    "0",        "--train.threads",  "1"};
}

std::vector<double> losses_of(const std::string& out, int steps) {
  const std::regex line("step +[0-9]+/" + std::to_string(steps) + " \\| loss ([0-9.]+) \\|");
  std::vector<double> losses;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator(); ++it)
    losses.push_back(std::stod((*it)[1].str()));
  return losses;
}

std::string train(const TempDir& dir, const std::vector<std::string>& args, int workers = 2) {
  std::vector<std::string> all = {"train", "--workers", std::to_string(workers)};
  all.insert(all.end(), args.begin(), args.end());
  const ProcessResult r = run_troupe(dir, all, std::chrono::seconds(120));
  INFO("stdout tail: " << r.out.substr(r.out.size() > 3000 ? r.out.size() - 3000 : 0));
  INFO("stderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  return r.out;
}

// The final `param norm` line's figure (printed to 6 significant decimals or more).
double param_norm_of(const std::string& out) {
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex("param norm ([0-9.]+)")));
  return std::stod(m[1].str());
}

// The arguments of sums compressed as `kind` from the second step on (step index 1).
std::vector<std::string> compressed_from_step_1(const char* kind) {
  return {"--comm.compress", kind, "--comm.compress_start_step", "1"};
}

// `args` with sums compressed as `kind` only after its last step: the plain run's losses and final
// parameter norm, bit for bit.
void check_late_start_is_plain(const TempDir& dir, const std::vector<std::string>& args, const std::string& plain,
                               const char* kind, int workers) {
  const std::string late =
      train(dir, with(args, {"--comm.compress", kind, "--comm.compress_start_step", "6"}), workers);
  CHECK(losses_of(late, kExpertSteps) == losses_of(plain, kExpertSteps));
  CHECK(param_norm_of(late) == param_norm_of(plain));
}

}  // namespace

TEST_CASE("two workers splitting moe-tiny's experts print the losses of two data-parallel workers", "[cli][moe]") {
  TempDir dir;
  const std::vector<double> plain = losses_of(train(dir, moe_steps(kExpertSteps)), kExpertSteps);
  const std::string out = train(dir, with(moe_steps(kExpertSteps), {"--expert.shards", "2"}));
  CHECK_THAT(out, Catch::Contains("2 rank(s) x batch 2 x seq 64 x accum 1, 2 expert shards of 2 experts each"));
  const std::vector<double> sharded = losses_of(out, kExpertSteps);
  REQUIRE(plain.size() == kExpertSteps);
  REQUIRE(sharded.size() == kExpertSteps);
  // Printed to 4 decimals; the experts' products run over other row counts, so f32 rounding may
  // move the last digit.
  for (int i = 0; i < kExpertSteps; ++i) {
    INFO("step " << i + 1 << ": " << plain[i] << " against " << sharded[i]);
    CHECK(std::abs(plain[i] - sharded[i]) <= 2e-4);
  }
}

TEST_CASE(
    "fine-grained experts, a quarter of the dense MLP's width, on two expert shards print the losses of two "
    "data-parallel workers, and their checkpoint refuses a model of another expert width in one line",
    "[cli][moe][checkpoint]") {
  TempDir dir;
  const std::vector<std::string> fine = {"--model.expert_width", "128", "--model.top_k", "4"},
                                 saved = {"--checkpoint.every", "2", "--checkpoint.dir", (dir.path() / "ck").string()};
  const std::string out = train(dir, with(with(moe_steps(kExpertSteps), fine), {"--expert.shards", "2"}));
  CHECK_THAT(out, Catch::Contains("experts: 4 in each of 2 MoE blocks (every 2), top-4, 128 wide"));
  const std::vector<double> plain =
                                losses_of(train(dir, with(with(moe_steps(kExpertSteps), fine), saved)), kExpertSteps),
                            sharded = losses_of(out, kExpertSteps);
  REQUIRE(plain.size() == kExpertSteps);
  REQUIRE(sharded.size() == kExpertSteps);
  for (int i = 0; i < kExpertSteps; ++i) CHECK(std::abs(plain[i] - sharded[i]) <= 2e-4);

  std::vector<std::string> wide = {"train", "--workers", "1"};
  for (const auto& a : with(with(moe_steps(kExpertSteps + 2), saved), {"--model.top_k", "4", "--resume"}))
    wide.push_back(a);
  const ProcessResult r = run_troupe(dir, wide, std::chrono::seconds(60));
  CHECK(r.exit_code != 0);
  CHECK_THAT(r.err, Catch::Contains("checkpoint was written for expert_width 128, this model has 512"));
}

TEST_CASE("four workers in expert groups of 2 and of 4 print the losses of four data-parallel workers", "[cli][moe]") {
  TempDir dir;
  const std::vector<double> plain = losses_of(train(dir, moe_steps(kExpertSteps), 4), kExpertSteps);
  REQUIRE(plain.size() == kExpertSteps);
  for (const char* shards : {"2", "4"}) {
    INFO(shards << " expert shards");
    const std::vector<double> sharded =
        losses_of(train(dir, with(moe_steps(kExpertSteps), {"--expert.shards", shards}), 4), kExpertSteps);
    REQUIRE(sharded.size() == kExpertSteps);
    for (int i = 0; i < kExpertSteps; ++i) CHECK(std::abs(plain[i] - sharded[i]) <= 2e-4);
  }
}

TEST_CASE(
    "two pipeline stages of two data replicas in expert groups of 2 print the one-process loss over 20 steps, and "
    "their checkpoint resumes in one process",
    "[cli][moe][pipeline]") {
  TempDir dir;
  constexpr int steps = 20;
  // Each step: 2 replicas × 4 micro-batches of 2 sequences, one process's 8 accumulated ones.
  const std::string alone = train(dir, with(moe_steps(steps), {"--train.grad_accum", "8"}), 1);
  const std::vector<std::string> staged = {"--pipeline.stages", "2", "--expert.shards", "2"};
  const std::vector<std::string> saved = {"--checkpoint.every", "10", "--checkpoint.dir", (dir.path() / "ck").string()};
  const std::string out = train(dir, with(with(moe_steps(steps), staged), saved), 4);
  CHECK_THAT(out, Catch::Contains("x 2 expert shards of 2 experts each"));
  const std::vector<double> one = losses_of(alone, steps), grid = losses_of(out, steps);
  REQUIRE(one.size() == steps);
  REQUIRE(grid.size() == steps);
  for (int i = 0; i < steps; ++i) {
    INFO("step " << i + 1 << ": " << one[i] << " against " << grid[i]);
    CHECK(std::abs(one[i] - grid[i]) <= 2e-4);
  }
  CHECK(std::abs(param_norm_of(out) - param_norm_of(alone)) <= 1e-6 * param_norm_of(alone));
  std::printf("moe-tiny %d steps, pp 2 x ep 2 on 4 workers: loss %.4f, param norm %.6f (one process: %.4f, %.6f)\n",
              steps, grid.back(), param_norm_of(out), one.back(), param_norm_of(alone));
  // The checkpoint of step 10 holds the whole model: one process goes on from it (the step-20 one
  // removed, so it is the newest).
  std::filesystem::remove_all(dir.path() / "ck" / "step-0000020");
  const std::string resumed =
      train(dir, with(with(moe_steps(steps), saved), {"--train.grad_accum", "8", "--resume"}), 1);
  CHECK_THAT(resumed, Catch::Contains("resumed from"));
  const std::vector<double> rest = losses_of(resumed, steps);
  REQUIRE(rest.size() == steps - 10);
  for (int i = 0; i < steps - 10; ++i) CHECK(std::abs(rest[static_cast<std::size_t>(i)] - one[10 + i]) <= 2e-4);
}

TEST_CASE(
    "two pipeline stages of two replicas under ZeRO-3, and in expert groups of 2 under GPipe, interleaved, ZeRO 1 "
    "and 2, print one process's losses and param norm; the interleaved ZeRO-2 checkpoint resumes in one process",
    "[cli][moe][pipeline]") {
  TempDir dir;
  const std::string alone = train(dir, with(moe_steps(kExpertSteps), {"--train.grad_accum", "8"}), 1);
  const std::vector<double> one = losses_of(alone, kExpertSteps);
  REQUIRE(one.size() == kExpertSteps);
  for (const std::vector<std::string>& layout :
       {std::vector<std::string>{"--train.zero", "3"},
        {"--expert.shards", "2", "--pipeline.schedule", "gpipe"},
        {"--expert.shards", "2", "--pipeline.schedule", "interleaved", "--pipeline.virtual_stages", "2"},
        {"--expert.shards", "2", "--train.zero", "1"}}) {
    const std::string out = train(dir, with(with(moe_steps(kExpertSteps), {"--pipeline.stages", "2"}), layout), 4);
    INFO(layout[0] << " " << layout[1] << " " << layout.back());
    const std::vector<double> grid = losses_of(out, kExpertSteps);
    REQUIRE(grid.size() == kExpertSteps);
    for (int i = 0; i < kExpertSteps; ++i) CHECK(std::abs(one[i] - grid[i]) <= 2e-4);
    CHECK(std::abs(param_norm_of(out) - param_norm_of(alone)) <= 1e-6 * param_norm_of(alone));
  }
  // ZeRO 2, interleaved: each replica writes its segments of the moments of both its chunks (each a
  // buffer a run of a kind), the first expert group the experts; its gradient norm takes each chunk's
  // segments where they lie in the chunk. One process resumes from step 2 (the step-4 checkpoint
  // removed) on the straight run's losses.
  const std::vector<std::string> saved = {"--checkpoint.every", "2", "--checkpoint.dir", (dir.path() / "ck").string()};
  const std::string out =
      train(dir,
            with(with(moe_steps(kExpertSteps), {"--pipeline.stages", "2", "--expert.shards", "2", "--pipeline.schedule",
                                                "interleaved", "--pipeline.virtual_stages", "2", "--train.zero", "2"}),
                 saved),
            4);
  const std::vector<double> grid = losses_of(out, kExpertSteps);
  REQUIRE(grid.size() == kExpertSteps);
  for (int i = 0; i < kExpertSteps; ++i) CHECK(std::abs(one[i] - grid[i]) <= 2e-4);
  CHECK(std::abs(param_norm_of(out) - param_norm_of(alone)) <= 1e-6 * param_norm_of(alone));
  std::filesystem::remove_all(dir.path() / "ck" / "step-0000004");
  const std::string resumed =
      train(dir, with(with(moe_steps(kExpertSteps), saved), {"--train.grad_accum", "8", "--resume"}), 1);
  CHECK_THAT(resumed, Catch::Contains("resumed from"));
  const std::vector<double> rest = losses_of(resumed, kExpertSteps);
  REQUIRE(rest.size() == 2);
  for (int i = 0; i < 2; ++i) CHECK(std::abs(rest[static_cast<std::size_t>(i)] - one[2 + i]) <= 2e-4);
  CHECK(std::abs(param_norm_of(resumed) - param_norm_of(alone)) <= 1e-6 * param_norm_of(alone));
}

TEST_CASE(
    "two pipeline stages under zb-h1 and zb-v, alone and as two replicas in expert groups of 2, print one "
    "process's losses and param norm",
    "[cli][moe][pipeline]") {
  TempDir dir;
  const std::vector<std::string> zb_h1 = {"--pipeline.schedule", "zb-h1"},
                                 zb_v = {"--pipeline.schedule", "zb-v", "--pipeline.virtual_stages", "2"};
  // Each replica runs 4 micro-batches a step: one process accumulates 4 per replica.
  for (const int replicas : {1, 2}) {
    const std::string alone =
        train(dir, with(moe_steps(kExpertSteps), {"--train.grad_accum", std::to_string(4 * replicas)}), 1);
    const std::vector<double> one = losses_of(alone, kExpertSteps);
    REQUIRE(one.size() == kExpertSteps);
    std::vector<std::string> staged = {"--pipeline.stages", "2"};
    if (replicas == 2) staged = with(staged, {"--expert.shards", "2"});
    for (const std::vector<std::string>& schedule : {zb_h1, zb_v}) {
      INFO(replicas << " replicas, " << schedule[1]);
      const std::string out = train(dir, with(with(moe_steps(kExpertSteps), staged), schedule), 2 * replicas);
      const std::vector<double> grid = losses_of(out, kExpertSteps);
      REQUIRE(grid.size() == kExpertSteps);
      for (int i = 0; i < kExpertSteps; ++i) CHECK(std::abs(one[i] - grid[i]) <= 2e-4);
      CHECK(std::abs(param_norm_of(out) - param_norm_of(alone)) <= 1e-6 * param_norm_of(alone));
      std::printf(
          "moe-tiny %d steps, pp 2 x ep %d %s on %d workers: loss %.4f, param norm %.7f (one process: %.4f, "
          "%.7f)\n",
          kExpertSteps, replicas, schedule[1].c_str(), 2 * replicas, grid.back(), param_norm_of(out), one.back(),
          param_norm_of(alone));
    }
  }
}

TEST_CASE("a checkpoint written with expert shards resumes without them and prints the straight run's loss",
          "[cli][moe][checkpoint]") {
  TempDir dir;
  const std::vector<std::string> sharded = {"--expert.shards", "2"},
                                 saved = {"--checkpoint.every", "2", "--checkpoint.dir", (dir.path() / "ck").string()};
  const std::vector<double> straight = losses_of(train(dir, with(moe_steps(kExpertSteps), sharded)), kExpertSteps);
  REQUIRE(straight.size() == kExpertSteps);
  train(dir, with(with(moe_steps(2), sharded), saved));
  const std::string again = train(dir, with(with(moe_steps(kExpertSteps), saved), {"--resume"}));
  CHECK_THAT(again, Catch::Contains("resumed from"));
  const std::vector<double> resumed = losses_of(again, kExpertSteps);
  REQUIRE(resumed.size() == kExpertSteps - 2);
  CHECK(std::abs(resumed.back() - straight.back()) <= 2e-4);
}

namespace {

// A straight run of `steps` steps in expert groups of 2 against a chain of resumes from one
// checkpoint folder: 2 steps saved with `first`, the third resumed with `second`, the rest resumed
// without expert shards; every resumed step's loss within 2e-4 of the straight run's. Each resumed
// run takes a step on the moments the previous one saved in its own layout; within the warm-up the
// learning rate does not depend on train.steps.
void check_resume_chain(const TempDir& dir, int steps, const std::vector<std::string>& first,
                        const std::vector<std::string>& second) {
  const std::vector<std::string> saved = {"--checkpoint.every", "1", "--checkpoint.dir", (dir.path() / "ck").string()};
  const std::vector<double> straight =
      losses_of(train(dir, with(moe_steps(steps), {"--expert.shards", "2"}), 4), steps);
  REQUIRE(straight.size() == static_cast<std::size_t>(steps));
  train(dir, with(with(moe_steps(2), saved), first), 4);
  const std::string third = train(dir, with(with(with(moe_steps(3), saved), second), {"--resume"}), 4);
  CHECK_THAT(third, Catch::Contains("resumed from"));
  const std::vector<double> resumed = losses_of(third, 3);
  REQUIRE(resumed.size() == 1);
  CHECK(std::abs(resumed[0] - straight[2]) <= 2e-4);
  const std::vector<double> rest = losses_of(train(dir, with(with(moe_steps(steps), saved), {"--resume"}), 4), steps);
  REQUIRE(rest.size() == static_cast<std::size_t>(steps - 3));
  for (std::size_t i = 0; i < rest.size(); ++i) CHECK(std::abs(rest[i] - straight[3 + i]) <= 2e-4);
}

}  // namespace

TEST_CASE("a checkpoint of expert groups of 2 resumes in groups of 4, and that one without expert shards",
          "[cli][moe][checkpoint]") {
  TempDir dir;
  check_resume_chain(dir, kExpertSteps, {"--expert.shards", "2"}, {"--expert.shards", "4"});
}

TEST_CASE(
    "a worker of an expert group that throws recovers in place from the rank holding its experts, on the "
    "straight run's losses",
    "[cli][moe][recovery]") {
  TempDir dir;
  const std::vector<std::string> sharded = {"--expert.shards", "2"};
  const std::vector<double> straight = losses_of(train(dir, with(moe_steps(kExpertSteps), sharded), 4), kExpertSteps);
  REQUIRE(straight.size() == kExpertSteps);
  // Rank 1 holds expert shard 1 of group {0, 1}; rank 3 holds the same experts in group {2, 3}.
  ScopedEnv thrown("TROUPE_DRILL_THROW_AT", "1:2");
  const std::string out = train(dir, with(with(moe_steps(kExpertSteps), sharded), {"--fault.recovery", "in_place"}), 4);
  CHECK_THAT(out, Catch::Contains("state given by rank 3 to rank 1"));
  const std::vector<double> recovered = losses_of(out, kExpertSteps);
  REQUIRE(recovered.size() == kExpertSteps);
  for (int i = 0; i < kExpertSteps; ++i) CHECK(std::abs(recovered[i] - straight[i]) <= 2e-4);
}

// Each rank's dense moments are its segment over every rank, its experts' over the ranks holding
// them (one rank with one expert group): the same updates as ZeRO 0, fewer moments a rank.
TEST_CASE("workers in expert groups under ZeRO 1 and 2 print ZeRO 0's losses and parameter norm", "[cli][moe][zero]") {
  TempDir dir;
  for (int workers : {2, 4}) {
    INFO(workers << " workers in expert groups of 2");
    const std::vector<std::string> sharded = with(moe_steps(kExpertSteps), {"--expert.shards", "2"});
    const std::string plain = train(dir, sharded, workers);
    const std::vector<double> losses = losses_of(plain, kExpertSteps);
    REQUIRE(losses.size() == kExpertSteps);
    for (const char* zero : {"1", "2"}) {
      INFO("train.zero " << zero);
      const std::string out = train(dir, with(sharded, {"--train.zero", zero}), workers);
      const std::vector<double> zeroed = losses_of(out, kExpertSteps);
      REQUIRE(zeroed.size() == kExpertSteps);
      for (int i = 0; i < kExpertSteps; ++i) CHECK(std::abs(losses[i] - zeroed[i]) <= 2e-4);
      CHECK(std::abs(param_norm_of(out) - param_norm_of(plain)) <= 1e-5 * param_norm_of(plain));
    }
  }
}

// Under ZeRO-3 a rank keeps its segment of the dense parameters over every rank and of its experts
// over the ranks holding them, and gathers each block's pieces over those two groups.
TEST_CASE(
    "workers in expert groups of 2 under ZeRO-3 print one process's losses and parameter norm, and their checkpoint "
    "resumes in one process",
    "[cli][moe][zero][checkpoint]") {
  TempDir dir;
  for (int workers : {2, 4}) {
    INFO(workers << " workers in expert groups of 2");
    const std::string ck = (dir.path() / ("ck" + std::to_string(workers))).string();
    const std::vector<std::string> saved = {"--checkpoint.every", "2", "--checkpoint.dir", ck};
    // One process sums as many micro-batches as there are workers.
    const std::string alone =
        train(dir, with(moe_steps(kExpertSteps), {"--train.grad_accum", std::to_string(workers)}), 1);
    const std::string out =
        train(dir, with(with(moe_steps(kExpertSteps), {"--expert.shards", "2", "--train.zero", "3"}), saved), workers);
    const std::vector<double> one = losses_of(alone, kExpertSteps), zeroed = losses_of(out, kExpertSteps);
    REQUIRE(one.size() == kExpertSteps);
    REQUIRE(zeroed.size() == kExpertSteps);
    for (int i = 0; i < kExpertSteps; ++i) {
      INFO("step " << i + 1 << ": " << one[i] << " against " << zeroed[i]);
      CHECK(std::abs(one[i] - zeroed[i]) <= 2e-4);
    }
    CHECK(std::abs(param_norm_of(out) - param_norm_of(alone)) <= 1e-5 * param_norm_of(alone));
    std::printf(
        "moe-tiny %d steps, ep 2 under ZeRO-3 on %d workers: loss %.4f, param norm %.7f (one process: %.4f, "
        "%.7f)\n",
        kExpertSteps, workers, zeroed.back(), param_norm_of(out), one.back(), param_norm_of(alone));
    // Every rank wrote its segments of step 2: one process goes on from them.
    std::filesystem::remove_all(std::filesystem::path(ck) / "step-0000004");
    const std::string resumed = train(
        dir, with(with(moe_steps(kExpertSteps), saved), {"--train.grad_accum", std::to_string(workers), "--resume"}),
        1);
    CHECK_THAT(resumed, Catch::Contains("resumed from"));
    const std::vector<double> rest = losses_of(resumed, kExpertSteps);
    REQUIRE(rest.size() == kExpertSteps - 2);
    for (int i = 0; i < kExpertSteps - 2; ++i) CHECK(std::abs(rest[static_cast<std::size_t>(i)] - one[2 + i]) <= 2e-4);
    CHECK(std::abs(param_norm_of(resumed) - param_norm_of(alone)) <= 1e-5 * param_norm_of(alone));
  }
}

TEST_CASE(
    "a ZeRO-2 checkpoint of expert groups of 2 resumes under ZeRO 1 in groups of 4, and that one under ZeRO 0 "
    "without expert shards",
    "[cli][moe][zero][checkpoint]") {
  TempDir dir;
  check_resume_chain(dir, kExpertSteps + 1, {"--expert.shards", "2", "--train.zero", "2"},
                     {"--expert.shards", "4", "--train.zero", "1"});
}

// The sums of bf16 and PowerSGD are those of the same compression without expert shards: PowerSGD's
// P and Q are linear in the gradients each rank adds (the experts' per-rank parts summed over the
// expert group first), so PowerSGD's run is the one without expert shards to rounding, far closer
// to it than to plain sums; bf16 rounds other partial sums, so it matches to its rounding. Before the
// start step they are the plain sums, bit for bit. ZeRO 1 and 2 compress each group's sums alike.
TEST_CASE("workers in expert groups under bf16 and PowerSGD sums train as the same compression without expert shards",
          "[cli][moe][compression]") {
  TempDir dir;
  const std::vector<std::string> sharded = with(moe_steps(kExpertSteps), {"--expert.shards", "2"});
  const std::string plain = train(dir, sharded, 4);
  for (const char* kind : {"bf16", "powersgd"}) {
    INFO("comm.compress " << kind);
    check_late_start_is_plain(dir, sharded, plain, kind, 4);
    const std::vector<std::string> compressed = compressed_from_step_1(kind);
    const double with_experts = param_norm_of(train(dir, with(sharded, compressed), 4));
    const double without = param_norm_of(train(dir, with(moe_steps(kExpertSteps), compressed), 4));
    std::printf("%s: param norm %.7f with expert shards, %.7f without, %.7f plain\n", kind, with_experts, without,
                param_norm_of(plain));
    // Under ZeRO (1 for PowerSGD, which ZeRO-2 does not take; 2 for bf16, its reduce-scatter on both groups).
    const bool powersgd = std::string(kind) == "powersgd";
    const double zeroed =
        param_norm_of(train(dir, with(with(sharded, compressed), {"--train.zero", powersgd ? "1" : "2"}), 4));
    for (double run : {with_experts, zeroed}) {
      if (powersgd) {
        CHECK(std::abs(run - without) < 0.1 * std::abs(without - param_norm_of(plain)));
      } else {
        // bf16 moves the weights by its rounding alone, about as much as the other partial sums do.
        CHECK(std::abs(run - without) <= 1e-6 * without);
      }
    }
  }
}

// On pipeline stages each run of a kind of a stage's buffer is summed over its own group through a
// compressor of its own: the dense ones over the stage's four replicas, the experts' over the two
// ranks holding them. PowerSGD's state of each is written where it is held, the residuals of the
// experts a rank does not hold as zeros, so the run resumed in its layout is the straight one bit
// for bit, and without expert shards it goes on with the same sums, to rounding.
TEST_CASE(
    "two pipeline stages of four replicas in expert groups of 2 under bf16 and PowerSGD sums train as the same "
    "compression without expert shards, and the PowerSGD checkpoint resumes in its layout and without them",
    "[cli][moe][compression][pipeline]") {
  TempDir dir;
  const std::vector<std::string> staged = with(moe_steps(kExpertSteps), {"--pipeline.stages", "2"}),
                                 sharded = with(staged, {"--expert.shards", "2"});
  const std::string plain = train(dir, sharded, 8);
  for (const char* kind : {"bf16", "powersgd"}) {
    INFO("comm.compress " << kind);
    check_late_start_is_plain(dir, sharded, plain, kind, 8);
    const std::vector<std::string> compressed = compressed_from_step_1(kind);
    const std::string with_experts = train(dir, with(sharded, compressed), 8);
    CHECK_THAT(with_experts, Catch::Contains(std::string("gradients summed as ") + kind));
    const double without = param_norm_of(train(dir, with(staged, compressed), 8));
    std::printf("pp 2 x dp 4, %s sums: param norm %.7f with expert groups of 2, %.7f without, %.7f plain\n", kind,
                param_norm_of(with_experts), without, param_norm_of(plain));
    CHECK(param_norm_of(with_experts) != param_norm_of(plain));
    CHECK(std::abs(param_norm_of(with_experts) - without) <= 1e-6 * without);
  }
  const std::vector<std::string> powersgd = {"--comm.compress", "powersgd"},
                                 saved = {"--checkpoint.every", "1", "--checkpoint.dir", (dir.path() / "ck").string()};
  const double straight = param_norm_of(train(dir, with(sharded, powersgd), 8));
  train(dir, with(with(with(moe_steps(2), {"--pipeline.stages", "2", "--expert.shards", "2"}), powersgd), saved), 8);
  std::filesystem::copy(dir.path() / "ck", dir.path() / "ck-whole", std::filesystem::copy_options::recursive);
  const std::string resumed = train(dir, with(with(with(sharded, powersgd), saved), {"--resume"}), 8);
  CHECK_THAT(resumed, Catch::Contains("resumed from"));
  CHECK(param_norm_of(resumed) == straight);
  const std::string whole =
      train(dir, with(with(staged, powersgd), {"--checkpoint.dir", (dir.path() / "ck-whole").string(), "--resume"}), 8);
  CHECK_THAT(whole, Catch::Contains("resumed from"));
  CHECK(std::abs(param_norm_of(whole) - straight) <= 1e-6 * straight);
}

// A restore reads the whole checkpoint's residuals of the experts a rank does not hold into the
// zeros it writes for them: a stage rank resumed in expert groups from a checkpoint without them
// writes zeros there again at its next checkpoint (their residuals are the holding ranks').
TEST_CASE(
    "a pipeline rank in expert groups resumed from a PowerSGD checkpoint without them writes zeros as the residuals "
    "of the experts it does not hold",
    "[cli][moe][compression][checkpoint][pipeline]") {
  TempDir dir;
  const std::filesystem::path ck = dir.path() / "ck";
  const std::vector<std::string> staged = {"--pipeline.stages", "2", "--comm.compress", "powersgd"},
                                 saved = {"--checkpoint.every", "1", "--checkpoint.dir", ck.string()};
  train(dir, with(with(moe_steps(2), staged), saved), 8);
  const std::string resumed =
      train(dir, with(with(with(moe_steps(3), staged), saved), {"--expert.shards", "2", "--resume"}), 8);
  CHECK_THAT(resumed, Catch::Contains("resumed from"));
  const std::vector<float> before = checkpoint_values(troupe::checkpoint::step_dir(ck, 2)).at("powersgd_residual_dp0"),
                           after = checkpoint_values(troupe::checkpoint::step_dir(ck, 3)).at("powersgd_residual_dp0");
  // The experts of expert shard 1, which replica 0 does not hold, at their places in the whole model.
  const troupe::compute::GPTConfig config = *troupe::compute::gpt_preset("moe-tiny");
  REQUIRE(static_cast<std::int64_t>(before.size()) == troupe::compute::ParameterLayout(config).total());
  REQUIRE(after.size() == before.size());
  std::int64_t elements = 0;
  double held_before = 0, written_after = 0;
  const troupe::compute::ParameterLayout shard_1(config, {1, 2});
  for (const troupe::compute::ParameterView& view : shard_1.views()) {
    if (!view.expert) continue;
    for (std::int64_t i = view.global_offset; i < view.global_offset + view.numel(); ++i) {
      held_before += std::abs(before[static_cast<std::size_t>(i)]);
      written_after += std::abs(after[static_cast<std::size_t>(i)]);
      ++elements;
    }
  }
  INFO(elements << " elements of expert shard 1: |residual| summed " << held_before << " at step 2, " << written_after
                << " at step 3");
  CHECK(elements > 0);
  CHECK(held_before > 0);  // replica 0 held them all before: the restore read them
  CHECK(written_after == 0);
}

// PowerSGD's Q and residuals of both groups are in the checkpoint, in the whole model's order: the
// run resumed in its layout is the straight one bit for bit, and resumed without expert shards it
// goes on with the same sums, to rounding.
TEST_CASE(
    "a PowerSGD run in expert groups resumed from its checkpoint ends with the straight run's weights, in its layout "
    "and without expert shards",
    "[cli][moe][compression][checkpoint]") {
  TempDir dir;
  const std::vector<std::string> compressed = {"--comm.compress", "powersgd"},
                                 sharded = {"--expert.shards", "2", "--comm.compress", "powersgd"},
                                 saved = {"--checkpoint.every", "1", "--checkpoint.dir", (dir.path() / "ck").string()};
  const double straight = param_norm_of(train(dir, with(moe_steps(kExpertSteps), sharded), 4));
  train(dir, with(with(moe_steps(2), sharded), saved), 4);
  std::filesystem::copy(dir.path() / "ck", dir.path() / "ck-whole", std::filesystem::copy_options::recursive);
  const std::string resumed = train(dir, with(with(with(moe_steps(kExpertSteps), sharded), saved), {"--resume"}), 4);
  CHECK_THAT(resumed, Catch::Contains("resumed from"));
  CHECK(param_norm_of(resumed) == straight);
  const std::string whole = train(dir,
                                  with(with(moe_steps(kExpertSteps), compressed),
                                       {"--checkpoint.dir", (dir.path() / "ck-whole").string(), "--resume"}),
                                  4);
  CHECK_THAT(whole, Catch::Contains("resumed from"));
  std::printf("PowerSGD resumed without expert shards: param norm %.7f, straight in groups of 2 %.7f\n",
              param_norm_of(whole), straight);
  CHECK(std::abs(param_norm_of(whole) - straight) <= 1e-6 * straight);
}

// Tensor shards inside expert groups: each rank holds its E/EP experts, each split over its tensor
// group as a dense MLP is; the ranks at one tensor place of an expert group exchange the tokens.
TEST_CASE(
    "two tensor shards of replicas in expert groups print one process's losses and param norm under ZeRO 0 and 3 "
    "and sequence parallelism and on two pipeline stages and their ZeRO-3 checkpoint resumes in one process",
    "[cli][moe][tensor][zero][checkpoint]") {
  TempDir dir;
  const std::vector<std::string> tp2_ep2 = {"--tensor.shards", "2", "--expert.shards", "2"};
  // Two replicas: one process sums two micro-batches. Four on two stages: four.
  const std::string two = train(dir, with(moe_steps(kExpertSteps), {"--train.grad_accum", "2"}), 1),
                    four = train(dir, with(moe_steps(kExpertSteps), {"--train.grad_accum", "4"}), 1);
  auto check_same = [&](const std::string& out, const std::string& alone, const std::string& name) {
    INFO(name);
    const std::vector<double> want = losses_of(alone, kExpertSteps), got = losses_of(out, kExpertSteps);
    REQUIRE(want.size() == kExpertSteps);
    REQUIRE(got.size() == kExpertSteps);
    for (int i = 0; i < kExpertSteps; ++i) CHECK(std::abs(want[i] - got[i]) <= 2e-4);
    CHECK(std::abs(param_norm_of(out) - param_norm_of(alone)) <= 1e-6 * param_norm_of(alone));
    std::printf("moe-tiny %d steps, %s: loss %.4f, param norm %.7f (one process: %.4f, %.7f)\n", kExpertSteps,
                name.c_str(), got.back(), param_norm_of(out), want.back(), param_norm_of(alone));
  };
  check_same(train(dir, with(moe_steps(kExpertSteps), tp2_ep2), 4), two, "tp 2 x ep 2");
  check_same(train(dir,
                   with(with(moe_steps(kExpertSteps), tp2_ep2),
                        {"--tensor.sequence_parallel", "true", "--train.recompute", "full"}),
                   4),
             two, "tp 2 x ep 2 sequence parallel under full recompute");
  const std::string ck = (dir.path() / "ck").string();
  const std::vector<std::string> saved = {"--checkpoint.every", "2", "--checkpoint.dir", ck};
  const std::string zero3 =
      train(dir, with(with(with(moe_steps(kExpertSteps), tp2_ep2), {"--train.zero", "3"}), saved), 4);
  check_same(zero3, two, "tp 2 x ep 2 under ZeRO-3");
  check_same(train(dir,
                   with(with(moe_steps(kExpertSteps), tp2_ep2),
                        {"--pipeline.stages", "2", "--pipeline.microbatches", "2", "--train.zero", "1"}),
                   8),
             four, "pp 2 x tp 2 x ep 2 under ZeRO-1");
  // Every rank wrote its segments of its slices of step 2: one process goes on from them.
  std::filesystem::remove_all(std::filesystem::path(ck) / "step-0000004");
  const std::string resumed =
      train(dir, with(with(moe_steps(kExpertSteps), saved), {"--train.grad_accum", "2", "--resume"}), 1);
  CHECK_THAT(resumed, Catch::Contains("resumed from"));
  const std::vector<double> rest = losses_of(resumed, kExpertSteps), one = losses_of(two, kExpertSteps);
  REQUIRE(rest.size() == kExpertSteps - 2);
  for (int i = 0; i < kExpertSteps - 2; ++i) CHECK(std::abs(rest[static_cast<std::size_t>(i)] - one[2 + i]) <= 2e-4);
  CHECK(std::abs(param_norm_of(resumed) - param_norm_of(two)) <= 1e-6 * param_norm_of(two));
}

TEST_CASE("expert shards that do not divide the data-parallel replicas are refused in one line, exit 2", "[cli][moe]") {
  TempDir dir;
  check_rejected_in(dir, with({"train", "--workers", "2", "--expert.shards", "4"}, moe_steps(2)),
                    "expert.shards 4 does not divide the job's 2 data-parallel replicas");
}

TEST_CASE(
    "under ZeRO-3 two pipeline stages of four replicas in expert groups of 2 (two chunks a rank) and of 4 print one "
    "process's losses and param norm, and the checkpoint of groups of 2 resumes in one process and in groups of 4",
    "[cli][moe][pipeline]") {
  TempDir dir;
  // Each step: 4 replicas x 4 micro-batches of 2 sequences, one process's 16 accumulated ones.
  const std::string alone = train(dir, with(moe_steps(kExpertSteps), {"--train.grad_accum", "16"}), 1);
  const std::vector<double> one = losses_of(alone, kExpertSteps);
  REQUIRE(one.size() == kExpertSteps);
  const std::vector<std::string> zero3 = {"--pipeline.stages", "2", "--train.zero", "3"};
  const std::vector<std::string> saved = {"--checkpoint.every", "2", "--checkpoint.dir", (dir.path() / "ck").string()};
  // Groups of 2: each expert's segments over the 2 ranks at its place (an expert data-parallel group
  // of 2); groups of 4: each rank alone at its place, keeping its experts whole.
  const std::string pairs =
      train(dir,
            with(with(with(moe_steps(kExpertSteps), zero3),
                      {"--expert.shards", "2", "--pipeline.schedule", "interleaved", "--pipeline.virtual_stages", "2"}),
                 saved),
            8);
  const std::string fours = train(dir, with(with(moe_steps(kExpertSteps), zero3), {"--expert.shards", "4"}), 8);
  for (const std::string* out : {&pairs, &fours}) {
    const std::vector<double> grid = losses_of(*out, kExpertSteps);
    REQUIRE(grid.size() == kExpertSteps);
    for (int i = 0; i < kExpertSteps; ++i) CHECK(std::abs(one[i] - grid[i]) <= 2e-4);
    CHECK(std::abs(param_norm_of(*out) - param_norm_of(alone)) <= 1e-6 * param_norm_of(alone));
  }
  std::printf(
      "moe-tiny %d steps, ZeRO-3 on pp 2 x dp 4 in expert groups of 2 and of 4: param norm %.7f and %.7f "
      "(one process %.7f)\n",
      kExpertSteps, param_norm_of(pairs), param_norm_of(fours), param_norm_of(alone));
  // Every rank wrote its segments of each run (the parameters and both moments): step 2 resumes in
  // one process and in groups of 4 on the straight run's losses and norm (each resume's own step-4
  // checkpoint removed before the next).
  for (const auto& [layout, workers] : {std::pair{std::vector<std::string>{"--train.grad_accum", "16"}, 1},
                                        std::pair{with(zero3, {"--expert.shards", "4"}), 8}}) {
    std::filesystem::remove_all(dir.path() / "ck" / "step-0000004");
    const std::string resumed =
        train(dir, with(with(with(moe_steps(kExpertSteps), saved), layout), {"--resume"}), workers);
    CHECK_THAT(resumed, Catch::Contains("resumed from"));
    const std::vector<double> rest = losses_of(resumed, kExpertSteps);
    REQUIRE(rest.size() == 2);
    for (int i = 0; i < 2; ++i) CHECK(std::abs(rest[static_cast<std::size_t>(i)] - one[2 + i]) <= 2e-4);
    CHECK(std::abs(param_norm_of(resumed) - param_norm_of(alone)) <= 1e-6 * param_norm_of(alone));
  }
}
