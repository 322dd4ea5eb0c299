// troupe bench zero3: ZeRO-3 against plain data parallelism (ZeRO-0) on the same ranks, in the same
// run, step by step: tokens per second and the bytes each rank holds.
//
// Every rank keeps three trainers of one model: ZeRO-0 (gradients all-reduced in per-layer buckets
// while backward runs, as a job does), ZeRO-3 (each block gathered before use, the next one
// prefetched, its gradients reduce-scattered during backward), and ZeRO-3 with full activation
// recomputation. Each iteration steps all three, in an order that rotates so none always follows
// another, after a barrier so the ranks start together; a step's time is the slowest rank's. The
// figures are the iterations' medians, and each iteration's ratios are taken within it, since a
// shared VM drifts by more than the differences measured.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "actors/worker/data_parallel_hooks.hpp"
#include "actors/worker/mailbox_comm.hpp"
#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/bench_rank.hpp"
#include "apps/exit_codes.hpp"
#include "comm/bootstrap.hpp"
#include "comm/collectives.hpp"
#include "compute/random.hpp"
#include "compute/train/trainer.hpp"

namespace troupe::apps {
namespace {

using Clock = std::chrono::steady_clock;

enum Variant : int { zero0, zero3, zero3_full, variants };
constexpr std::array<const char*, variants> variant_names{"ZeRO-0", "ZeRO-3", "ZeRO-3 + full recompute"};

// Per rank and variant: what it holds between steps, and at its peak.
struct Held {
  double model_state = 0;       // parameters, gradients, AdamW moments kept between steps
  double transient = 0;         // ZeRO-3's gathered blocks and unit gradients, at their peak
  double activations = 0;
};

// One variant's model and trainer on this rank.
class VariantTraining {
 public:
  VariantTraining(compute::Backend& backend, const compute::GPTConfig& cfg, const BenchZero3Options& o,
                  const std::vector<std::uint16_t>& stream, compute::DataParallel dp, compute::Recompute recompute)
      : source_(compute::shards_parameters(dp.zero_stage)
                    ? std::make_unique<compute::ShardedParameters>(backend, compute::GPT::parameter_units(cfg),
                                                                   compute::DType::f32, dp.rank, dp.shard_offsets,
                                                                   dp.unit_exchange, true)
                    : nullptr),
        model_(cfg, backend, compute::DType::f32, recompute, source_.get()),
        trainer_(initialised(model_), options(o, cfg, std::move(dp), source_.get(), recompute), stream, stream) {}

  double timed_step() {
    const auto start = Clock::now();
    trainer_.step();
    return std::chrono::duration<double>(Clock::now() - start).count();
  }

  Held held() {
    Held h;
    compute::AdamW& adamw = trainer_.optimizer();
    h.model_state = static_cast<double>(model_.params().nbytes() + model_.grads().nbytes() +
                                        adamw.first_moments().nbytes() + adamw.second_moments().nbytes());
    if (source_) h.transient = static_cast<double>(source_->buffer_bytes(false) + source_->buffer_bytes(true));
    h.activations = static_cast<double>(model_.stage().activation_bytes());
    return h;
  }

 private:
  static compute::GPT& initialised(compute::GPT& model) {
    model.init_parameters(1);
    return model;
  }
  static compute::TrainerOptions options(const BenchZero3Options& o, const compute::GPTConfig& cfg,
                                         compute::DataParallel dp, compute::ShardedParameters* source,
                                         compute::Recompute recompute) {
    compute::TrainerOptions options;
    options.batch_size = o.batch;
    options.seq_len = cfg.block_size;
    options.lr = {1e-4, 1e-5, 0, o.warmup + o.steps};
    options.recompute = recompute;
    options.data_parallel = std::move(dp);
    options.data_parallel.sharded = source;
    return options;
  }

  std::unique_ptr<compute::ShardedParameters> source_;
  compute::GPT model_;
  compute::Trainer trainer_;
};

// Iteration i steps the variants in this order.
constexpr std::array<std::array<Variant, variants>, variants> orders{{
    {zero0, zero3, zero3_full},
    {zero3, zero3_full, zero0},
    {zero3_full, zero0, zero3},
}};

// A rank's report: its step seconds per variant and iteration (variant-major), then what each
// variant holds (three doubles per variant).
Expected<std::vector<double>> run_rank(comm::Engine& engine, const compute::GPTConfig& cfg,
                                       const BenchZero3Options& o, const std::vector<std::uint16_t>& stream) {
  auto backend = compute::make_backend(compute::BackendKind::cpu, compute::Precision::fp32, 1);
  if (!backend) return backend.error();
  auto joined = BenchRank::join(engine, o.processes);
  if (!joined) return joined.error();
  BenchRank& rank = **joined;
  const std::int64_t total = compute::ParameterLayout(cfg).total();
  auto hooks = [&](compute::ZeroStage stage) {
    return actors::group_data_parallel(rank.mailbox(), rank.group(), rank.progress(), stage, total);
  };
  std::array<std::unique_ptr<VariantTraining>, variants> trainings{
      std::make_unique<VariantTraining>(**backend, cfg, o, stream, hooks(compute::ZeroStage::none),
                                        compute::Recompute::none),
      std::make_unique<VariantTraining>(**backend, cfg, o, stream, hooks(compute::ZeroStage::parameters),
                                        compute::Recompute::none),
      std::make_unique<VariantTraining>(**backend, cfg, o, stream, hooks(compute::ZeroStage::parameters),
                                        compute::Recompute::full)};
  std::vector<double> seconds(static_cast<std::size_t>(variants * o.steps));
  for (int i = 0; i < o.warmup + o.steps; ++i) {
    for (Variant v : orders[static_cast<std::size_t>(i % variants)]) {
      if (Status s = rank.group().barrier(); !s) return s.error();
      const double t = trainings[static_cast<std::size_t>(v)]->timed_step();
      if (i >= o.warmup) seconds[static_cast<std::size_t>(v * o.steps + i - o.warmup)] = t;
    }
  }
  for (auto& training : trainings) {
    const Held h = training->held();
    seconds.insert(seconds.end(), {h.model_state, h.transient, h.activations});
  }
  return seconds;
}

}  // namespace

int run_bench_zero3(const BenchZero3Options& o) {
  const compute::GPTConfig cfg = *compute::gpt_preset(o.model);
  const int n = o.processes;
  std::printf("bench zero3: %s, %d ranks, micro-batch %d x seq %d per rank, 1 thread per process, %d iterations after "
              "%d warm-up\n(each iteration steps ZeRO-0, ZeRO-3 and ZeRO-3 + full recompute in a rotating order; "
              "ratios within each iteration)\n",
              o.model.c_str(), n, o.batch, cfg.block_size, o.steps, o.warmup);
  std::fflush(stdout);
  const std::vector<std::uint16_t> stream = bench_tokens(cfg, static_cast<std::size_t>(o.batch) * cfg.block_size * 4 + 1);

  auto results = comm::run_local_ranks(
      n,
      [&](comm::Engine& engine) -> Expected<std::vector<std::uint8_t>> {
        auto report = run_rank(engine, cfg, o, stream);
        if (!report) return report.error();
        return pack_figures(*report);
      },
      std::chrono::minutes(30));
  if (!results) return error_exit(ExitCode::failure, results.error().message);
  const std::size_t expected = static_cast<std::size_t>(variants * o.steps + 3 * variants);
  std::vector<std::vector<double>> reports;
  for (std::size_t r = 0; r < results->size(); ++r) {
    const auto& result = (*results)[r];
    if (!result.ok || result.report.size() != expected * sizeof(double))
      return error_exit(ExitCode::failure, "bench zero3: rank " + std::to_string(r) + " of " + std::to_string(n) +
                                               ": " + (result.error.empty() ? "reported no step times" : result.error));
    reports.push_back(unpack_figures(result.report));
  }

  std::printf("%-9s %12s %12s %18s %14s %19s\n", "iteration", "ZeRO-0 tok/s", "ZeRO-3 tok/s", "ZeRO-3 full tok/s",
              "ZeRO-3/ZeRO-0", "ZeRO-3 full/ZeRO-0");
  const double tokens = static_cast<double>(n) * o.batch * cfg.block_size;
  std::vector<double> ratio3, ratio_full;
  for (int i = 0; i < o.steps; ++i) {
    std::array<double, variants> tps{};
    for (int v = 0; v < variants; ++v) {
      double slowest = 0;
      for (const auto& report : reports) slowest = std::max(slowest, report[static_cast<std::size_t>(v * o.steps + i)]);
      tps[static_cast<std::size_t>(v)] = tokens / slowest;
    }
    ratio3.push_back(tps[zero3] / tps[zero0]);
    ratio_full.push_back(tps[zero3_full] / tps[zero0]);
    std::printf("%-9d %12.0f %12.0f %18.0f %14.3f %19.3f\n", i + 1, tps[zero0], tps[zero3], tps[zero3_full],
                ratio3.back(), ratio_full.back());
  }
  std::printf("medians: ZeRO-3 / ZeRO-0 tokens/s %.3f (target >= 0.90), ZeRO-3 + full recompute / ZeRO-0 %.3f "
              "(target >= 0.70)\n",
              median(ratio3), median(ratio_full));

  // Rank 0's bytes (the ranks' shards differ by at most one element).
  std::array<Held, variants> held;
  for (int v = 0; v < variants; ++v) {
    const std::size_t at = static_cast<std::size_t>(variants * o.steps + 3 * v);
    held[static_cast<std::size_t>(v)] = {reports[0][at], reports[0][at + 1], reports[0][at + 2]};
  }
  std::printf("bytes per rank: %-24s %14s %22s %14s\n", "", "model state", "+ gathered/unit grads", "activations");
  for (int v = 0; v < variants; ++v) {
    const Held& h = held[static_cast<std::size_t>(v)];
    std::printf("                %-24s %10.1f MiB %18.1f MiB %10.1f MiB\n", variant_names[static_cast<std::size_t>(v)],
                mib(h.model_state), mib(h.transient), mib(h.activations));
  }
  const Held& base = held[zero0];
  std::printf("ZeRO-3 / ZeRO-0: model state %.3f kept between steps, %.3f at the peak with the gathered blocks and "
              "unit gradients (target <= 0.55)\n",
              held[zero3].model_state / base.model_state,
              (held[zero3].model_state + held[zero3].transient) / base.model_state);
  std::printf("ZeRO-3 + full recompute / ZeRO-0: activations %.3f (target <= 0.3)\n",
              held[zero3_full].activations / base.activations);
  return to_int(ExitCode::success);
}

Command add_bench_zero3_command(CLI::App& bench) {
  auto options = std::make_shared<BenchZero3Options>();
  CLI::App* command = bench.add_subcommand(
      "zero3", "ZeRO-3 (and with full recompute) against ZeRO-0 on the same ranks, in turns: tokens/s and bytes.");
  add_model_option(*command, options->model);
  add_rank_batch_option(*command, options->batch);
  command->add_option("--processes", options->processes, "data-parallel processes")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  add_iteration_options(*command, options->steps, "one step of each variant", options->warmup);
  return refusing_unknown(*command, [options] { return run_bench_zero3(*options); });
}

}  // namespace troupe::apps
