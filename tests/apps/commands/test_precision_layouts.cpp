// Every layout under train.precision bf16 takes the steps of one process in bf16, within the
// layout tolerance docs/precision.md states (wider than fp32's: a layout sums in another order,
// and a last-bit difference in an operand sometimes moves its bf16 rounding a whole bf16 step).
// One table: data replicas and ZeRO-1/2/3, accumulation, recompute, pipeline schedules, tensor
// shards (and sequence parallelism), context shards (ring and all-to-all), and compressed sums
// against data replicas with the same compression; expert shards against data replicas.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "apps/one_process_steps.hpp"
#include "apps/run_troupe.hpp"
#include "support/temp_dir.hpp"

using namespace troupe::test;

namespace {

// Steps of tiny each run takes: enough for the rounding differences to go through AdamW.
constexpr long bf16_steps = 12;

// docs/precision.md, "Layouts": how far a layout's bf16 run may stray from one process's in bf16.
const StepTolerance bf16_layout_tolerance{/*loss=*/1e-4, /*grad_norm=*/2e-3, /*param_norm=*/1e-5, /*val=*/1e-4,
                                          /*weights=*/5e-3};

struct PrecisionLayout {
  std::string name;
  std::vector<std::string> args;
  // The run it must equal: one process of batch 8 unless it names a data-parallel run with the same
  // compression (a compressed sum is not a plain one).
  std::vector<std::string> reference{"--train.batch_size", "8"};
};

const std::vector<std::string> dp2{"--workers", "2", "--train.batch_size", "4"};
const std::vector<std::string> pp2{"--workers",          "2", "--pipeline.stages", "2", "--pipeline.microbatches", "2",
                                   "--train.batch_size", "4"};
const std::vector<std::string> tp2{"--workers", "2", "--tensor.shards", "2", "--train.batch_size", "8"};
const std::vector<std::string> cp2{"--workers", "2", "--context.shards", "2", "--train.batch_size", "8"};

void check_layouts_in_bf16(const std::vector<PrecisionLayout>& layouts) {
  TempDir dir;
  const std::vector<std::string> bf16{"--train.precision", "bf16"};
  std::map<std::vector<std::string>, Run> references;
  for (const PrecisionLayout& l : layouts) {
    auto found = references.find(l.reference);
    if (found == references.end())
      found = references.emplace(l.reference, run_tiny(dir, "one", with(bf16, l.reference), bf16_steps)).first;
    check_same_steps(run_tiny(dir, "run", with(bf16, l.args), bf16_steps), found->second, l.name + " in bf16",
                     bf16_layout_tolerance);
  }
}

}  // namespace

TEST_CASE(
    "in bf16, data replicas, ZeRO-3, a 1F1B pipeline, tensor shards with sequence parallelism, ring context shards "
    "and full recompute take the one-process bf16 steps of tiny within the bf16 layout tolerance",
    "[precision]") {
  check_layouts_in_bf16({
      {"dp 2", dp2},
      {"dp 2 zero 3", with(dp2, {"--train.zero", "3"})},
      {"pp 2 1f1b", pp2},
      {"tp 2 sequence parallel", with(tp2, {"--tensor.sequence_parallel", "true"})},
      {"cp 2 ring", cp2},
      {"full recompute", {"--train.batch_size", "8", "--train.recompute", "full"}},
  });
}

TEST_CASE(
    "in bf16, every other layout takes the one-process bf16 steps of tiny within the bf16 layout tolerance, "
    "and compressed sums those of data replicas with the same compression",
    "[precision][slow]") {
  const std::vector<std::string> powersgd{"--comm.compress", "powersgd", "--comm.compress_start_step", "1"};
  const std::vector<std::string> bf16_sums{"--comm.compress", "bf16", "--comm.compress_start_step", "1"};
  check_layouts_in_bf16({
      {"dp 2 zero 1", with(dp2, {"--train.zero", "1"})},
      {"dp 2 zero 2", with(dp2, {"--train.zero", "2"})},
      {"accumulation 2", {"--train.batch_size", "4", "--train.grad_accum", "2"}},
      {"selective recompute", {"--train.batch_size", "8", "--train.recompute", "selective"}},
      {"pp 2 gpipe", with(pp2, {"--pipeline.schedule", "gpipe"})},
      {"pp 2 interleaved v 2", with(pp2, {"--pipeline.schedule", "interleaved", "--pipeline.virtual_stages", "2"})},
      {"pp 2 zb-v", with(pp2, {"--pipeline.schedule", "zb-v", "--pipeline.virtual_stages", "2"})},
      {"tp 2", tp2},
      {"dp 2 x tp 2 zero 3",
       {"--workers", "4", "--tensor.shards", "2", "--train.batch_size", "4", "--train.zero", "3"}},
      {"tp 2 x pp 2",
       {"--workers", "4", "--tensor.shards", "2", "--pipeline.stages", "2", "--pipeline.microbatches", "2",
        "--train.batch_size", "4"}},
      {"cp 2 all_to_all", with(cp2, {"--context.method", "all_to_all"})},
      {"cp 2 zero 2", with(cp2, {"--train.zero", "2"})},
      {"dp 2 x pp 2, powersgd sums",
       with({"--workers", "4", "--pipeline.stages", "2", "--pipeline.microbatches", "2", "--train.batch_size", "2"},
            powersgd),
       with(dp2, powersgd)},
      {"dp 2 x tp 2, bf16 sums", with({"--workers", "4", "--tensor.shards", "2", "--train.batch_size", "4"}, bf16_sums),
       with(dp2, bf16_sums)},
  });
}

// moe-tiny's experts over 2 expert shards against 2 data replicas holding every expert (its
// weights have another layout than tiny's: the printed steps are compared). A token's experts are
// a discrete choice: when a rounding moves a router logit across the top-k boundary the token takes
// another expert (the load figure of the step differs), so the losses are held to 1e-3
// (docs/precision.md, "Layouts").
constexpr double bf16_expert_loss_tolerance = 1e-3;

TEST_CASE(
    "in bf16, two workers splitting moe-tiny's experts take the steps of two data replicas within the bf16 "
    "layout tolerance",
    "[precision][moe]") {
  TempDir dir;
  const std::vector<std::string> job{"train",
                                     "--workers",
                                     "2",
                                     "--model.preset",
                                     "moe-tiny",
                                     "--train.steps",
                                     std::to_string(bf16_steps),
                                     "--train.seq_len",
                                     "64",
                                     "--train.batch_size",
                                     "2",
                                     "--train.val_every",
                                     "0",
                                     "--train.val_batches",
                                     "1",
                                     "--sample.tokens",
                                     "0",
                                     "--train.threads",
                                     "1",
                                     "--train.log_every",
                                     "1",
                                     "--train.precision",
                                     "bf16"};
  auto steps_of = [&](const std::vector<std::string>& args) {
    const ProcessResult r = run_troupe(dir, with(job, args), std::chrono::seconds(120));
    INFO("stdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    std::vector<StepFigures> steps;
    // "step 3/12 | loss 5.2 | aux 1.0 | z 2.0 | load 1.9 | lr 1.5e-04 | norm 2.3 |"
    const std::regex line("step +[0-9]+/[0-9]+ \\| loss ([0-9.]+) \\|[^\\n]*? \\| norm ([0-9.]+)");
    for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), line); it != std::sregex_iterator(); ++it)
      steps.push_back({std::stod((*it)[1]), std::stod((*it)[2])});
    REQUIRE(steps.size() == static_cast<std::size_t>(bf16_steps));
    return steps;
  };
  const std::vector<StepFigures> replicas = steps_of({});
  const std::vector<StepFigures> sharded = steps_of({"--expert.shards", "2"});
  for (std::size_t s = 0; s < replicas.size(); ++s) {
    INFO("step " << s + 1 << ": loss " << sharded[s].loss << " vs " << replicas[s].loss << ", gradient norm "
                 << sharded[s].grad_norm << " vs " << replicas[s].grad_norm);
    CHECK(close(sharded[s].loss, replicas[s].loss, bf16_expert_loss_tolerance, 1e-4));
    CHECK(close(sharded[s].grad_norm, replicas[s].grad_norm, bf16_layout_tolerance.grad_norm, 1e-3));
  }
}
