// troupe bench dp: data-parallel training against one process, in the same run, step by step.
//
// A shared VM's speed drifts by more than data parallelism costs, within seconds: separate runs
// of one process and of n processes compare two different machines. So all n + 1 processes
// live at once and take turns, one step each: rank n alone (the one-process reference), ranks
// 0..n-1 side by side without summing gradients (what the machine gives n processes: shared
// caches, memory bandwidth, the host's scheduling of the vCPUs), then ranks 0..n-1 in data
// parallel (gradients summed by the ring all-reduce in per-layer buckets while backward runs,
// completions in the worker's mailbox, as in a job). Every iteration measures all three,
// in an order that rotates, and gives its own ratios; the figures are the iterations' medians.
// A rank that is not measured waits on a semaphore and takes no CPU (bench_turns.hpp).

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>

#include "actors/worker/data_parallel_hooks.hpp"
#include "actors/worker/mailbox_comm.hpp"
#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/bench_rank.hpp"
#include "apps/bench/bench_turns.hpp"
#include "apps/exit_codes.hpp"
#include "comm/bootstrap.hpp"
#include "comm/collectives.hpp"
#include "compute/random.hpp"
#include "compute/train/trainer.hpp"

namespace troupe::apps {
namespace {

enum class DpTurn : int { single, independent, data_parallel, stop };

// Iteration i runs the three turns in this order, so none always follows another.
constexpr std::array<std::array<DpTurn, 3>, 3> dp_turn_orders{{
    {DpTurn::single, DpTurn::independent, DpTurn::data_parallel},
    {DpTurn::independent, DpTurn::data_parallel, DpTurn::single},
    {DpTurn::data_parallel, DpTurn::single, DpTurn::independent},
}};

// The leader's report: its one-process step times, one per measured iteration.
std::vector<double> dp_lead(Turns<DpTurn>& turns, BenchTraining& alone, const BenchDpOptions& o) {
  turns.wait_for_followers();  // all built: nobody computes while the reference is measured
  return turns.lead_rounds(dp_turn_orders, o.warmup + o.steps, o.warmup, DpTurn::single,
                           [&] { return alone.timed_step(); });
}

// A follower's report: its data-parallel step times, then its independent ones.
Expected<std::vector<double>> dp_follow(comm::Engine& engine, Turns<DpTurn>& turns, compute::Backend& backend,
                                        const compute::GPTConfig& cfg, const BenchDpOptions& o,
                                        const std::vector<std::uint16_t>& stream) {
  const int rank = engine.rank();
  auto joined = BenchRank::join(engine, o.processes);
  if (!joined) return joined.error();
  BenchRank& worker = **joined;
  const int steps = o.warmup + o.steps;
  BenchTraining parallel(backend, cfg, o.batch, steps, stream,
                         actors::group_data_parallel(worker.mailbox(), worker.group(), worker.progress(),
                                                     compute::ZeroStage::none, compute::ParameterLayout(cfg).total()));
  BenchTraining alone(backend, cfg, o.batch, steps, stream, {});
  turns.finish();
  std::vector<double> dp, independent;
  int turns_taken = 0;
  for (DpTurn turn = turns.next(rank); turn != DpTurn::stop; turn = turns.next(rank)) {
    const bool measured = turns_taken++ >= 2 * o.warmup;
    const double seconds = turn == DpTurn::data_parallel ? parallel.timed_step() : alone.timed_step();
    if (measured) (turn == DpTurn::data_parallel ? dp : independent).push_back(seconds);
    turns.finish();
  }
  dp.insert(dp.end(), independent.begin(), independent.end());
  return dp;
}

const char* order_name(int iteration) {
  static constexpr std::array<const char*, 3> names{"1 ind dp", "ind dp 1", "dp 1 ind"};
  return names[static_cast<std::size_t>(iteration % 3)];
}

}  // namespace

int run_bench_dp(const BenchDpOptions& o) {
  const compute::GPTConfig cfg = *compute::gpt_preset(o.model);
  const int n = o.processes;
  std::printf("bench dp: %s, micro-batch %d x seq %d per rank, 1 thread per process, %d iterations after %d warm-up\n",
              o.model.c_str(), o.batch, cfg.block_size, o.steps, o.warmup);
  std::printf("(%d + 1 processes take turns, one step each: 1 process alone, %d independent ones at once (what the\n"
              " machine gives %d processes), %d in data parallel; scaling = dp / (%d x 1 proc) within each iteration)\n",
              n, n, n, n, n);
  std::fflush(stdout);
  Turns<DpTurn> turns(n);
  const std::vector<std::uint16_t> stream = bench_tokens(cfg, static_cast<std::size_t>(o.batch) * cfg.block_size * 4 + 1);

  auto results = comm::run_local_ranks(
      n + 1,
      [&](comm::Engine& engine) -> Expected<std::vector<std::uint8_t>> {
        auto backend = compute::make_backend(compute::BackendKind::cpu, compute::Precision::fp32, 1);
        if (!backend) return backend.error();
        if (engine.rank() == n) {
          BenchTraining alone(**backend, cfg, o.batch, o.warmup + o.steps, stream, {});
          return pack_figures(dp_lead(turns, alone, o));
        }
        auto times = dp_follow(engine, turns, **backend, cfg, o, stream);
        if (!times) return times.error();
        return pack_figures(*times);
      },
      std::chrono::minutes(30));
  if (!results) return error_exit(ExitCode::failure, results.error().message);
  std::vector<std::vector<double>> times;
  for (std::size_t r = 0; r < results->size(); ++r) {
    const auto& result = (*results)[r];
    const std::size_t expected = static_cast<std::size_t>(o.steps) * (static_cast<int>(r) == n ? 1 : 2);
    if (!result.ok || result.report.size() != expected * sizeof(double))
      return error_exit(ExitCode::failure, "bench dp: rank " + std::to_string(r) + " of " + std::to_string(n + 1) +
                                               ": " + (result.error.empty() ? "reported no step times" : result.error));
    times.push_back(unpack_figures(result.report));
  }

  std::printf("%-9s %-9s %12s %17s %10s %8s %14s %14s\n", "iteration", "order", "1 proc tok/s", "independent tok/s",
              "dp tok/s", "scaling", "machine share", "dp/independent");
  const double tokens = static_cast<double>(o.batch) * cfg.block_size;
  std::vector<double> scaling, share, communication;
  for (int i = 0; i < o.steps; ++i) {
    double dp_seconds = 0, independent_seconds = 0;
    for (int r = 0; r < n; ++r) {
      dp_seconds = std::max(dp_seconds, times[static_cast<std::size_t>(r)][static_cast<std::size_t>(i)]);
      independent_seconds =
          std::max(independent_seconds, times[static_cast<std::size_t>(r)][static_cast<std::size_t>(o.steps + i)]);
    }
    const double single_tps = tokens / times[static_cast<std::size_t>(n)][static_cast<std::size_t>(i)];
    const double independent_tps = n * tokens / independent_seconds, dp_tps = n * tokens / dp_seconds;
    scaling.push_back(dp_tps / (n * single_tps));
    share.push_back(independent_tps / (n * single_tps));
    communication.push_back(dp_tps / independent_tps);
    std::printf("%-9d %-9s %12.0f %17.0f %10.0f %8.3f %14.3f %14.3f\n", i + 1, order_name(o.warmup + i), single_tps,
                independent_tps, dp_tps, scaling.back(), share.back(), communication.back());
  }
  std::printf("medians: machine share %.3f, dp/independent %.3f\n", median(share), median(communication));
  std::printf("scaling (%d processes x 1 thread vs 1 x 1, median of iterations) = %.3f\n", n, median(scaling));
  return to_int(ExitCode::success);
}

Command add_bench_dp_command(CLI::App& bench) {
  auto options = std::make_shared<BenchDpOptions>();
  CLI::App* command = bench.add_subcommand("dp", "Data-parallel tokens/s against one process, same run.");
  add_model_option(*command, options->model);
  add_rank_batch_option(*command, options->batch);
  command->add_option("--processes", options->processes, "data-parallel processes")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  add_iteration_options(*command, options->steps, "a step alone, independent, data-parallel", options->warmup);
  return refusing_unknown(*command, [options] { return run_bench_dp(*options); });
}

}  // namespace troupe::apps
