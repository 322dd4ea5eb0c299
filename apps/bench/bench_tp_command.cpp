// troupe bench tp: one pipeline stage holding the whole model, split over T tensor shards
// (Megatron-LM's tensor parallelism, compute/model/tensor_shard.hpp), against one process, in the
// same run, step by step.
//
// As in bench dp, the VM drifts by more than the difference measured, so all T + 1 processes live
// at once and take turns (bench_turns.hpp), one step each: rank T alone (the reference), ranks
// 0..T-1 each training the whole model by itself (what the machine gives T processes at once),
// and ranks 0..T-1 as the tensor shards of one stage, in an order that rotates. Every side runs the
// runtime's PipelineTrainer, as a job does (the shards sum over their tp group through the
// worker's mailbox), on the same micro-batch, so the only difference is the split. Each iteration
// gives its own ratios; the figures are the iterations' medians.
//
// Per shard and tensor-parallel step the bench also reads what the comm engine counted over the tp
// group (the figures troupe_comm_tp_bytes_total exports: a collective's buffer, once per rank) and the
// time the step spent waiting for the shards' sums; per rank the parameter and AdamW bytes the
// memory ledger counted. Each is printed beside its closed form, computed from the model's
// dimensions alone.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "actors/worker/pipeline_trainer.hpp"
#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/bench_rank.hpp"
#include "apps/bench/bench_turns.hpp"
#include "apps/exit_codes.hpp"
#include "comm/bootstrap.hpp"
#include "comm/grid.hpp"
#include "compute/memory_ledger.hpp"
#include "compute/model/parameter_layout.hpp"
#include "compute/model/stage_split.hpp"
#include "compute/model/tensor_shard.hpp"
#include "compute/random.hpp"
#include "monitor/trace.hpp"
#include "schedules/checker.hpp"
#include "schedules/generate.hpp"

namespace troupe::apps {
namespace {

using Clock = std::chrono::steady_clock;

enum class TpTurn : int { single, independent, tensor_parallel, stop };

// Iteration i runs the three turns in this order, so none always follows another.
constexpr std::array<std::array<TpTurn, 3>, 3> tp_turn_orders{{
    {TpTurn::single, TpTurn::independent, TpTurn::tensor_parallel},
    {TpTurn::independent, TpTurn::tensor_parallel, TpTurn::single},
    {TpTurn::tensor_parallel, TpTurn::single, TpTurn::independent},
}};

const char* order_name(int iteration) {
  static constexpr std::array<const char*, 3> names{"1 ind tp", "ind tp 1", "tp 1 ind"};
  return names[static_cast<std::size_t>(iteration % 3)];
}

// What a shard reports per measured step, in this order, each a run of `steps` values; then the
// bytes it holds. The reference reports its step seconds and the bytes it holds.
enum ShardFigure : int { seconds, independent_seconds, all_reduce_bytes, all_gather_bytes, wait_seconds, shard_figures };

// A stage of the whole model with one micro-batch per step, as a job without a pipeline runs it
// (actors/worker/rank_wiring.cpp): checked once, before the fork.
struct StagePlan {
  schedules::Schedule schedule;
  int peak_stashed = 1;
  std::vector<compute::StageLayers> split;
};

Expected<StagePlan> plan_stage(const compute::GPTConfig& cfg) {
  auto schedule = schedules::generate_schedule(schedules::ScheduleKind::gpipe, 1, 1, 1);
  if (!schedule) return schedule.error();
  auto check = schedules::check_schedule(*schedule);
  if (!check) return check.error();
  auto split = compute::split_for_pipeline(cfg, 1, 1);
  if (!split) return split.error();
  return StagePlan{*schedule, check->peak_stashed.front(), *split};
}

// This process's parameters and AdamW moments, as the memory ledger counts their allocations.
double held_bytes() {
  const compute::MemoryReport memory = compute::memory_ledger().report();
  return static_cast<double>(memory[compute::MemoryKind::parameters].bytes +
                             memory[compute::MemoryKind::optimizer_state].bytes);
}

// Rank `o.shards` is the reference and leads the turns; ranks below it are the shards.
Expected<std::vector<double>> run_rank(comm::Engine& engine, Turns<TpTurn>& turns, const compute::GPTConfig& cfg,
                                       const BenchTpOptions& o, const StagePlan& plan,
                                       const std::vector<std::uint16_t>& stream) {
  const int own = engine.rank();
  const bool reference = own == o.shards;
  auto backend = compute::make_backend(compute::BackendKind::cpu, compute::Precision::fp32, 1);
  if (!backend) return backend.error();
  // The reference's tp group is itself alone, never used (a grid without shards has no tp group).
  comm::Group tp{comm::tp_group_id, {own}};
  if (!reference) {
    tp.ranks.clear();
    for (int r = 0; r < o.shards; ++r) tp.ranks.push_back(r);
  }
  auto joined = BenchRank::join(engine, std::move(tp));
  if (!joined) return joined.error();
  BenchRank& rank = **joined;
  // No data parallelism and no pipeline: each rank's dp and pp groups are itself.
  auto dp = comm::Communicator::create(engine, {comm::dp_group_id, {own}});
  if (!dp) return dp.error();
  auto pp = comm::Communicator::create(engine, {comm::pp_group_id, {own}});
  if (!pp) return pp.error();
  compute::TrainerOptions options;
  options.batch_size = o.batch;
  options.seq_len = cfg.block_size;
  options.lr = {1e-4, 1e-5, 0, o.warmup + o.steps};
  // The whole model on this rank alone (grid 1 x 1 x 1), or shard `own` of `o.shards`.
  auto trainer_on = [&](comm::Communicator* shard_group) {
    const comm::Grid grid{1, 1, shard_group != nullptr ? o.shards : 1};
    actors::PipelineSetup setup{cfg, plan.schedule, plan.split, plan.peak_stashed, grid,
                                shard_group != nullptr ? own : 0, options};
    return std::make_unique<actors::PipelineTrainer>(std::move(setup), **backend,
                                                     actors::PipelineGroups{engine, **dp, **pp, nullptr, shard_group},
                                                     rank.mailbox(), rank.progress(), stream, stream);
  };
  auto trainer = trainer_on(reference ? nullptr : &rank.group());
  // Before a shard builds its independent trainer, which the ledger would count too.
  const double held = held_bytes();

  std::vector<double> report;
  if (reference) {
    turns.wait_for_followers();  // all built: nobody computes while the reference is measured
    report = turns.lead_rounds(tp_turn_orders, o.warmup + o.steps, o.warmup, TpTurn::single, [&] {
      const auto start = Clock::now();
      trainer->step();
      return seconds_since(start);
    });
    report.push_back(held);
    return report;
  }

  // Each shard also trains the whole model by itself: what the machine gives T processes at once.
  auto alone = trainer_on(nullptr);
  // The trace's waits are the step's waits for the shards' sums and the loss statistics' gather:
  // with one stage and one replica nothing else is waited for as a message.
  monitor::TraceRecorder trace;
  trainer->record_into(trace);
  const comm::Traffic& traffic = *engine.traffic();
  auto counted = [&](comm::TrafficKind kind) {
    return static_cast<double>(traffic.tensor_parallel_totals(kind).bytes.load());
  };
  std::array<std::vector<double>, shard_figures> figures;
  turns.finish();
  int taken = 0;
  for (TpTurn turn = turns.next(own); turn != TpTurn::stop; turn = turns.next(own)) {
    const bool measured = taken++ >= 2 * o.warmup;
    if (turn == TpTurn::independent) {
      const auto start = Clock::now();
      alone->step();
      if (measured) figures[independent_seconds].push_back(seconds_since(start));
      turns.finish();
      continue;
    }
    const double reduced = counted(comm::TrafficKind::all_reduce), gathered = counted(comm::TrafficKind::all_gather);
    const auto start = Clock::now();
    trainer->step();
    const double step = seconds_since(start);
    if (measured) {
      figures[seconds].push_back(step);
      figures[all_reduce_bytes].push_back(counted(comm::TrafficKind::all_reduce) - reduced);
      figures[all_gather_bytes].push_back(counted(comm::TrafficKind::all_gather) - gathered);
    }
    turns.finish();
  }
  figures[wait_seconds].assign(static_cast<std::size_t>(o.steps), 0.0);
  for (const monitor::TraceEvent& e : trace.events()) {
    const int step = std::stoi(e.args.front().second) - o.warmup;  // args: step first
    if (e.category == "wait" && step >= 0) figures[wait_seconds][static_cast<std::size_t>(step)] += e.duration_us * 1e-6;
  }
  for (const auto& figure : figures) report.insert(report.end(), figure.begin(), figure.end());
  report.push_back(held);
  return report;
}

// A shard's figure `f` at measured step i.
double figure(const std::vector<double>& report, ShardFigure f, int steps, int i) {
  return report[static_cast<std::size_t>(f * steps + i)];
}

// Every shard and step gave the same value: that value; otherwise -1 (printed as such).
double same_everywhere(const std::vector<std::vector<double>>& shards, ShardFigure f, int steps) {
  const double first = figure(shards.front(), f, steps, 0);
  for (const auto& report : shards)
    for (int i = 0; i < steps; ++i)
      if (figure(report, f, steps, i) != first) return -1;
  return first;
}

}  // namespace

int run_bench_tp(const BenchTpOptions& o) {
  const compute::GPTConfig cfg = *compute::gpt_preset(o.model);
  const int n = o.shards;
  if (Status divides = compute::check_tensor_shards(cfg, n); !divides)
    return error_exit(ExitCode::bad_input,
                      "bench tp --shards " + std::to_string(n) + " on " + o.model + ": " + divides.error().message);
  auto plan = plan_stage(cfg);
  if (!plan) return error_exit(ExitCode::failure, plan.error().message);
  std::printf("bench tp: %s, micro-batch %d x seq %d, %d tensor shards x 1 thread against 1 process x 1 thread, %d "
              "iterations after %d warm-up\n",
              o.model.c_str(), o.batch, cfg.block_size, n, o.steps, o.warmup);
  std::printf("(%d + 1 processes take turns, one step each: 1 process alone, %d independent ones at once (what the "
              "machine gives %d processes),\n the %d as the shards of one stage on the same micro-batch; scaling = tp "
              "/ (%d x 1 proc) within each iteration; tp wait = the shards' mean time waiting for their sums)\n",
              n, n, n, n, n);
  std::fflush(stdout);
  Turns<TpTurn> turns(n);
  const std::vector<std::uint16_t> stream = bench_tokens(cfg, static_cast<std::size_t>(o.batch) * cfg.block_size * 4 + 1);

  auto results = comm::run_local_ranks(
      n + 1,
      [&](comm::Engine& engine) -> Expected<std::vector<std::uint8_t>> {
        auto report = run_rank(engine, turns, cfg, o, *plan, stream);
        if (!report) return report.error();
        return pack_figures(*report);
      },
      std::chrono::minutes(30));
  if (!results) return error_exit(ExitCode::failure, results.error().message);
  std::vector<std::vector<double>> shards;
  std::vector<double> single;
  for (std::size_t r = 0; r < results->size(); ++r) {
    const auto& result = (*results)[r];
    const bool reference = static_cast<int>(r) == n;
    const std::size_t expected = static_cast<std::size_t>(o.steps) * (reference ? 1 : shard_figures) + 1;
    if (!result.ok || result.report.size() != expected * sizeof(double))
      return error_exit(ExitCode::failure, "bench tp: rank " + std::to_string(r) + " of " + std::to_string(n + 1) +
                                               ": " + (result.error.empty() ? "reported no step times" : result.error));
    (reference ? single : shards.emplace_back()) = unpack_figures(result.report);
  }

  std::printf("%-9s %-9s %12s %17s %10s %8s %14s %14s %11s\n", "iteration", "order", "1 proc tok/s",
              "independent tok/s", "tp tok/s", "scaling", "machine share", "tp/independent", "tp wait ms");
  const double tokens = static_cast<double>(o.batch) * cfg.block_size;
  std::vector<double> scaling, share, split, wait_share;
  for (int i = 0; i < o.steps; ++i) {
    double tp_seconds = 0, independent = 0, waited = 0;
    for (const auto& report : shards) {
      tp_seconds = std::max(tp_seconds, figure(report, seconds, o.steps, i));
      independent = std::max(independent, figure(report, independent_seconds, o.steps, i));
      waited += figure(report, wait_seconds, o.steps, i) / n;
    }
    // The shards together train one micro-batch per step; the independent ones one each.
    const double single_tps = tokens / single[static_cast<std::size_t>(i)], tp_tps = tokens / tp_seconds,
                 independent_tps = n * tokens / independent;
    scaling.push_back(tp_tps / (n * single_tps));
    share.push_back(independent_tps / (n * single_tps));
    split.push_back(tp_tps / independent_tps);
    wait_share.push_back(waited / tp_seconds);
    std::printf("%-9d %-9s %12.0f %17.0f %10.0f %8.3f %14.3f %14.3f %11.1f\n", i + 1, order_name(o.warmup + i),
                single_tps, independent_tps, tp_tps, scaling.back(), share.back(), split.back(), waited * 1e3);
  }
  std::printf("medians: machine share %.3f, tp/independent %.3f, waiting for the shards' sums %.1f%% of a tp step\n",
              median(share), median(split), 100 * median(wait_share));
  std::printf("scaling (%d shards x 1 thread vs 1 x 1, median of iterations) = %.3f\n", n, median(scaling));

  // Closed forms, from the dimensions alone (f32 activations, f64 scalars).
  const double B = o.batch, T = cfg.block_size, C = cfg.n_embd, L = cfg.n_layer, activation = B * T * C * 4;
  const double norm = 8;  // the gradient norm's sum of squares over the shards
  const double all_reduce = (4 * L + 2) * activation + norm, all_gather = n * B * T * 3 * 4;
  const double reduced = same_everywhere(shards, all_reduce_bytes, o.steps);
  const double gathered = same_everywhere(shards, all_gather_bytes, o.steps);
  std::printf("bytes per shard per step, the tp group's collective buffers as the comm engine counts them (every "
              "shard and step the same, or -1):\n");
  std::printf("  all-reduce: measured %.0f, closed form %.0f = (4 per block x %.0f blocks + the embedding's + the lm "
              "head's input gradient) x B*T*C x 4 B + the gradient norm's 8 B\n",
              reduced, all_reduce, L);
  std::printf("  all-gather: measured %.0f, closed form %.0f = %d shards x (B,T,3) cross-entropy statistics x 4 B\n",
              gathered, all_gather, n);
  const double sent = 2.0 * (n - 1) / n * reduced + static_cast<double>(n - 1) / n * gathered;
  std::printf("  a ring sends 2(T-1)/T of an all-reduce's buffer per rank and (T-1)/T of an all-gather's: %.1f MiB "
              "sent per shard per step\n",
              mib(sent));

  // Replicated on every shard: wpe, each block's two LayerNorms and its two row-parallel biases, ln_f.
  const double all = static_cast<double>(compute::ParameterLayout(cfg).total());
  const double replicated = T * C + L * 6 * C + 2 * C;
  const double closed_ratio = ((all - replicated) / n + replicated) / all;
  double held = shards.front().back();
  for (const auto& report : shards)
    if (report.back() != held) held = -1;
  const double alone = single.back();
  std::printf("parameters + AdamW moments: each shard %.0f bytes (%.1f MiB; -1: the shards differ), 1 process %.0f "
              "(%.1f MiB): %.4f; closed form %.4f = (1/%d of the split parameters + the replicated wpe, LayerNorms, "
              "row-parallel biases, ln_f) / all\n",
              held, mib(held), alone, mib(alone), held / alone, closed_ratio, n);
  return to_int(ExitCode::success);
}

Command add_bench_tp_command(CLI::App& bench) {
  auto options = std::make_shared<BenchTpOptions>();
  CLI::App* command = bench.add_subcommand(
      "tp", "Tensor shards of one stage against one process, in turns: tokens/s, bytes moved and held.");
  add_model_option(*command, options->model);
  command->add_option("--batch", options->batch, "micro-batch (the shards' together, and the one process's)")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  command->add_option("--shards", options->shards, "tensor shards")->check(CLI::Range(2, 64))->capture_default_str();
  add_iteration_options(*command, options->steps, "a step alone, one in tensor shards", options->warmup);
  return refusing_unknown(*command, [options] { return run_bench_tp(*options); });
}

}  // namespace troupe::apps
