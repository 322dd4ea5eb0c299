// A job's layout is checked against the memory each rank may use before anything is allocated,
// by the single process and by the job process of --workers and launch alike: one line naming the
// keys, the layout, what a rank needs against what it has (and where that figure came from), and
// a layout of the same ranks that would fit, exit 2. A run that allocated first would not end
// within the timeout or would be killed; the refusal must come first.

#include <catch2/catch.hpp>

#include <regex>
#include <string>
#include <vector>

#include "apps/config/byte_size.hpp"
#include "apps/config/memory_fit.hpp"
#include "apps/config/resolve.hpp"
#include "apps/resolved_job.hpp"
#include "apps/run_troupe.hpp"
#include "compute/model/parameter_layout.hpp"
#include "schedules/layout_plan.hpp"

using namespace troupe::test;
using troupe::apps::check_memory_fit;
using troupe::apps::JobRanks;
using troupe::apps::RankMemory;
using troupe::compute::ZeroStage;

namespace {

const std::vector<std::pair<std::string, std::string>> sizes_that_cannot_fit{{"train.batch_size", "1000000"},
                                                                             {"model.block_size", "100000000"},
                                                                             {"model.n_embd", "1048576"},
                                                                             {"model.n_layer", "100000"},
                                                                             {"model.n_layer", "2147483647"}};

// What the planner says a rank of `job` on `ranks` needs, runtime included.
double planned_need(const troupe::actors::ResolvedJob& job, int ranks) {
  const JobRanks where{ranks, 1, ranks};
  auto planned =
      troupe::schedules::plan_layout(troupe::apps::job_workload(job, ranks), troupe::apps::job_cluster(where, 1e12),
                                     troupe::apps::job_layout(job, ranks));
  REQUIRE(planned.ok());
  return planned->memory.total() + troupe::apps::runtime_bytes_per_rank(job.config.train.backend);
}

troupe::actors::JobConfig small_batch(int batch_size) {
  troupe::actors::JobConfig config;
  config.model.preset = "small";
  config.train.batch_size = batch_size;
  return config;
}

}  // namespace

TEST_CASE("sizes that cannot fit are refused with one line before any allocation, with and without workers", "[cli]") {
  TempDir dir;
  for (const auto& [key, value] : sizes_that_cannot_fit) {
    // block_size reaches the estimate as train.seq_len, which defaults to it.
    const std::string named = key == "model.block_size" ? "train.seq_len " + value : key + " " + value;
    for (const std::vector<std::string>& start :
         {std::vector<std::string>{"train"}, std::vector<std::string>{"train", "--workers", "2"}}) {
      std::vector<std::string> args = start;
      args.insert(args.end(), {"--model.preset", "tiny", "--" + key, value});
      const ProcessResult refused = check_rejected_in(dir, args, named);
      CHECK_THAT(refused.err, Catch::Contains("a rank needs about") && Catch::Contains("is available per rank (") &&
                                  Catch::Contains("of parameters, gradients and optimizer state"));
    }
  }
}

TEST_CASE("a --memory-limit too small for a tiny job is refused in one line by train, --workers and launch", "[cli]") {
  TempDir dir;
  const std::string hosts = dir.write("hosts.txt", "localhost slots=2\n");
  const std::vector<std::vector<std::string>> starts{
      {"train"}, {"train", "--workers", "2"}, {"launch", "--hostfile", hosts}};
  const std::vector<std::string> rank_counts{"1 rank", "2 ranks", "2 ranks"};
  for (std::size_t i = 0; i < starts.size(); ++i) {
    std::vector<std::string> args = starts[i];
    args.insert(args.end(), {"--model.preset", "tiny", "--memory-limit", "1MiB"});
    const ProcessResult refused =
        check_rejected_in(dir, args,
                          "but 1.0 MiB is available per rank (--memory-limit); no layout of " + rank_counts[i] +
                              " fits; the smallest needs about");
    CHECK_THAT(refused.err, Catch::Contains("train.batch_size 8, train.seq_len 128 as zero 0"));
  }
}

// A limit of 1e30 bytes once let a batch of ten million sequences past the check, to die of an
// internal check allocating 327 GB (exit 1).
TEST_CASE("a --memory-limit beyond this machine still meets the memory check's line for a batch it cannot hold",
          "[cli]") {
  TempDir dir;
  const ProcessResult refused = check_rejected_in(
      dir, {"train", "--model.preset", "tiny", "--memory-limit", "1e30", "--train.batch_size", "10000000"},
      "train.batch_size 10000000");
  CHECK_THAT(refused.err, Catch::Contains(" rank on this machine, less than --memory-limit)"));
}

TEST_CASE("a --memory-limit that is not a size is refused in one line naming it", "[cli]") {
  TempDir dir;
  for (const std::string bad : {"12XB", "0", "-1GiB", "lots", "0x10"})
    check_rejected_in(dir, {"train", "--model.preset", "tiny", "--memory-limit", bad},
                      "--memory-limit " + bad + ": not a positive size");
}

TEST_CASE("a model size whose products overflow 64 bits is refused by resolve", "[config]") {
  troupe::actors::JobConfig config;
  config.model.preset = "tiny";
  config.model.n_embd = 2147483646;
  config.model.n_head = 2;
  const auto resolved = troupe::apps::resolve(config);
  REQUIRE_FALSE(resolved.ok());
  CHECK_THAT(resolved.error().message,
             Catch::Contains("model.n_embd 2147483646") && Catch::Contains("more than a 64-bit count holds"));
}

TEST_CASE("a job fits when the planner's peak and the runtime fit the memory per rank, to the byte", "[config]") {
  const auto job = resolved(small_batch(16));
  const double need = planned_need(job, 2);
  CHECK(check_memory_fit(job, {2, 1, 2}, RankMemory{need, "test"}).ok());
  const auto short_by_one = check_memory_fit(job, {2, 1, 2}, RankMemory{need - 1, "test"});
  REQUIRE_FALSE(short_by_one.ok());
  CHECK_THAT(short_by_one.error().message,
             Catch::StartsWith("model.n_layer 6, model.n_embd 384, model.vocab_size 256, train.batch_size 16, "
                               "train.seq_len 256 as zero 0, dp 2, micro-batch 16 x 1, recompute none on 2 ranks: "
                               "a rank needs about " +
                               troupe::apps::format_binary_size(need)) &&
                 Catch::Contains("is available per rank (test)"));
}

// Under train.precision bf16 a CPU rank also holds its products' operand copies (2 bytes an
// element with BF16 units, 4 emulated) and stores the activations its slots keep in bf16
// (docs/precision.md): the check counts both, to the byte.
TEST_CASE("under train.precision bf16 the memory check counts the operand copies and the activations stored in bf16",
          "[config][precision]") {
  auto config = small_batch(16);
  const double fp32 = planned_need(resolved(config), 2);
  config.train.precision = troupe::compute::Precision::bf16;
  const auto bf16_job = resolved(config);
  const double bf16 = planned_need(bf16_job, 2);
  const bool emulated = troupe::apps::job_workload(bf16_job, 2).emulated_products;
  // small at 16 x 256: the largest first operand 4096·4C and second 4096·4C values; 2 bytes saved
  // on each block's 16C a token (ln1, qkv, atty, ln2, fch, fch_gelu, residual2, residual3) but the
  // stage's output's C, and on ln_f's C.
  const double tokens = 4096, C = 384, copies = 2.0 * tokens * 4 * C * (emulated ? 4 : 2),
               stored = 2.0 * tokens * (6 * 16 * C);
  CHECK(bf16 - fp32 == Approx(copies - stored));
  CHECK_FALSE(check_memory_fit(bf16_job, {2, 1, 2}, RankMemory{bf16 - 1, "test"}).ok());
  CHECK(check_memory_fit(bf16_job, {2, 1, 2}, RankMemory{bf16, "test"}).ok());
}

TEST_CASE("the memory a rank needs falls with ZeRO, recompute and the ranks of the data-parallel group", "[config]") {
  auto config = small_batch(16);
  const double plain = planned_need(resolved(config), 2);
  CHECK(planned_need(resolved(config), 4) == plain);  // data parallelism replicates everything
  config.train.zero = ZeroStage::optimizer_state;
  const double zero1_on_2 = planned_need(resolved(config), 2);
  CHECK(zero1_on_2 < plain);
  CHECK(planned_need(resolved(config), 4) < zero1_on_2);  // the moments shard over more ranks
  config.train.zero = ZeroStage::none;
  config.train.recompute = troupe::compute::Recompute::full;
  CHECK(planned_need(resolved(config), 2) < plain);
}

TEST_CASE("a refusal names the fewest keys that make the job fit: train.recompute full alone", "[config]") {
  auto config = small_batch(16);
  const auto job = resolved(config);
  config.train.recompute = troupe::compute::Recompute::full;
  const double with_full = planned_need(resolved(config), 2);
  config.train.recompute = troupe::compute::Recompute::selective;
  REQUIRE(planned_need(resolved(config), 2) > with_full + (8 << 20));
  const auto refused = check_memory_fit(job, {2, 1, 2}, RankMemory{with_full + (4 << 20), "test"});
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message,
             Catch::EndsWith("is available per rank (test); train.recompute full would fit (about " +
                             troupe::apps::format_binary_size(with_full) + " per rank)"));
}

TEST_CASE("a refusal names train.zero when sharding the optimizer state is what makes the job fit", "[config]") {
  // One short sequence a rank: the parameters, gradients and moments are nearly all of it.
  auto config = small_batch(1);
  config.train.seq_len = 16;
  const auto job = resolved(config);
  config.train.zero = ZeroStage::gradients;
  const double with_zero = planned_need(resolved(config), 4);
  const auto refused = check_memory_fit(job, {4, 1, 4}, RankMemory{with_zero + (1 << 20), "test"});
  REQUIRE_FALSE(refused.ok());
  // ZeRO-1 needs as much (Troupe keeps the whole gradient buffer) but moves more bytes.
  CHECK_THAT(refused.error().message, Catch::EndsWith("; train.zero 2 would fit (about " +
                                                      troupe::apps::format_binary_size(with_zero) + " per rank)"));
}

TEST_CASE("when no layout of the ranks fits, a refusal says so and what the smallest needs", "[config]") {
  const auto job = resolved(small_batch(16));
  const auto refused = check_memory_fit(job, {2, 1, 2}, RankMemory{64 << 20, "test"});
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message,
             Catch::Contains("is available per rank (test); no layout of 2 ranks fits; the smallest needs about "));
}

TEST_CASE("a CUDA backend's job is not checked against host memory", "[config]") {
  auto config = small_batch(16);
  config.train.backend = troupe::compute::BackendKind::cuda;
  CHECK(check_memory_fit(resolved(config), {1, 1, 1}, std::optional<double>(1.0)).ok());
}

TEST_CASE("a sim rank counts 12 MiB of runtime and no tensors where a cpu rank counts 40 MiB and its tensors",
          "[config][sim]") {
  // A model of 1 block of 32 channels: its tensors are a fraction of a MiB, the runtime the rest.
  auto config = small_batch(1);
  config.model.n_layer = 1;
  config.model.n_embd = 32;
  config.model.n_head = 1;
  config.model.block_size = 32;
  config.train.seq_len = 32;
  const RankMemory per_rank{22.0 * 1024 * 1024, "test"};
  const auto on_cpu = check_memory_fit(resolved(config), {1024, 32, 32}, per_rank);
  REQUIRE_FALSE(on_cpu.ok());
  CHECK_THAT(on_cpu.error().message, Catch::Contains("40.0 MiB of runtime"));
  config.train.backend = troupe::compute::BackendKind::sim;
  CHECK(check_memory_fit(resolved(config), {1024, 32, 32}, per_rank).ok());
  CHECK(check_memory_fit(resolved(config), {1024, 32, 32}, RankMemory{12.0 * 1024 * 1024, "test"}).ok());
  const auto short_of_runtime =
      check_memory_fit(resolved(config), {1024, 32, 32}, RankMemory{11.9 * 1024 * 1024, "test"});
  REQUIRE_FALSE(short_of_runtime.ok());
  CHECK_THAT(short_of_runtime.error().message, Catch::Contains("12.0 MiB of runtime"));

  // A model whose states alone are gigabytes a rank: a sim rank's tensors are token tensors.
  config.model.n_layer = 8;
  config.model.n_embd = 4096;
  config.model.n_head = 32;
  config.model.block_size = 1024;
  config.train.seq_len = 1024;
  CHECK(check_memory_fit(resolved(config), {32, 8, 8}, RankMemory{16.0 * 1024 * 1024, "test"}).ok());
  config.train.backend = troupe::compute::BackendKind::cpu;
  CHECK_FALSE(check_memory_fit(resolved(config), {32, 8, 8}, RankMemory{16.0 * 1024 * 1024, "test"}).ok());
}

// DiLoCo's outer state (the last-sync weights, the outer momentum and the pseudo-gradient, f32
// each) over what a rank holds, with ZeRO's moments sharded over one island, not the job: the
// planner's optimizer state plus outer state against what the ranks' ledgers allocate of the kind.
TEST_CASE("the memory check counts DiLoCo's outer state as the ranks allocate it, ZeRO sharding over an island",
          "[config][diloco]") {
  TempDir dir;
  for (const ZeroStage zero : {ZeroStage::none, ZeroStage::parameters}) {
    troupe::actors::JobConfig config;
    config.model.preset = "tiny";
    config.train.batch_size = 2;
    config.train.seq_len = 32;
    config.train.zero = zero;
    config.train.sync = troupe::compute::SyncMode::diloco;
    config.train.islands = 2;
    config.train.diloco_steps = 2;
    const auto job = resolved(config);
    auto planned =
        troupe::schedules::plan_layout(troupe::apps::job_workload(job, 4), troupe::apps::job_cluster({4, 1, 4}, 1e12),
                                       troupe::apps::job_layout(job, 4));
    REQUIRE(planned.ok());
    const auto& memory = planned->memory;
    const double parameters = double(troupe::compute::ParameterLayout(job.model).total());
    // Two ranks an island: ZeRO-3 halves what a rank holds, whatever the islands.
    const double held = zero == ZeroStage::parameters ? parameters / 2 : parameters;
    CHECK(memory.outer == Approx(12 * held));
    CHECK(memory.optimizer == Approx(8 * held));
    const std::string zero_text = std::to_string(troupe::compute::zero_number(zero));
    const ProcessResult r = run_troupe(
        dir, with({"train", "--workers", "4", "--train.sync", "diloco", "--train.islands", "2", "--train.diloco_steps",
                   "2", "--train.zero", zero_text, "--train.batch_size", "2", "--train.seq_len", "32"},
                  tiny_steps(3)));
    INFO("train.zero " << zero_text << ": planned optimizer " << memory.optimizer << " B and outer " << memory.outer
                       << " B\nstdout: " << r.out << "\nstderr: " << r.err);
    REQUIRE(r.exit_code == 0);
    const std::regex end_line(
        "memory at end of rank (\\d+): .*optimizer_state [0-9.]+ [KMG]?i?B \\(peak ([0-9.]+) (B|KiB|MiB|GiB)\\)");
    int ranks = 0;
    for (auto it = std::sregex_iterator(r.out.begin(), r.out.end(), end_line); it != std::sregex_iterator(); ++it) {
      const std::smatch& m = *it;
      const double scale = m[3] == "GiB" ? 1 << 30 : m[3] == "MiB" ? 1 << 20 : m[3] == "KiB" ? 1 << 10 : 1;
      const double allocated = std::stod(m[2].str()) * scale;
      INFO("rank " << m[1] << ": optimizer_state peak " << allocated << " B");
      // The log prints 3 significant digits.
      CHECK(allocated == Approx(memory.optimizer + memory.outer).epsilon(0.01));
      ++ranks;
    }
    CHECK(ranks == 4);
  }
}

// Under ZeRO-3 a replica runs its share of the step's micro-batches as one batch
// (compute/train/trainer.hpp): the check plans the largest share's activations at once.
TEST_CASE("under train.zero 3 with uneven shares the memory check plans the largest share as one batch",
          "[config][balance]") {
  troupe::actors::JobConfig config = small_batch(2);
  config.train.grad_accum = 4;
  config.train.zero = ZeroStage::parameters;
  const auto even = resolved(config);
  const double even_need = planned_need(even, 2);
  CHECK(check_memory_fit(even, {2, 1, 2}, RankMemory{even_need, "test"}).ok());
  config.train.balance = troupe::compute::BalanceMode::fixed;
  config.train.replica_speeds = "1,0.33";  // shares 6 + 2 of 8
  const auto uneven = check_memory_fit(resolved(config), {2, 1, 2}, RankMemory{even_need, "test"});
  REQUIRE_FALSE(uneven.ok());
  CHECK_THAT(uneven.error().message, Catch::Contains("as zero 3, dp 2, micro-batch 12 x 1, recompute none on 2 ranks"));
  // Dynamic shares may move all but one micro-batch each for the others to one replica: 7 of 8.
  config.train.balance = troupe::compute::BalanceMode::dynamic;
  const auto moving = check_memory_fit(resolved(config), {2, 1, 2}, RankMemory{even_need, "test"});
  REQUIRE_FALSE(moving.ok());
  CHECK_THAT(moving.error().message, Catch::Contains("micro-batch 14 x 1"));

  // On pipeline stages every unit and gradient is held whole for the step: ZeRO-1's memory, and
  // the largest share's micro-batches stashed.
  config.train.balance = troupe::compute::BalanceMode::fixed;
  config.train.grad_accum = 1;
  config.pipeline.stages = 2;
  config.pipeline.microbatches = 4;
  const auto stages = check_memory_fit(resolved(config), {4, 1, 4}, RankMemory{1, "test"});
  REQUIRE_FALSE(stages.ok());
  CHECK_THAT(stages.error().message, Catch::Contains("as zero 1, dp 2, pp 2 1f1b, micro-batch 2 x 6"));
}
