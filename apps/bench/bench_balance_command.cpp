// troupe bench balance: data parallelism over 2 replicas of which one is held to a share of a core by
// a CPU quota (cpu_quota.hpp), as a slower device of a mixed cluster runs. In turns, in one run:
//   1. each replica alone (both at once, summing nothing): what each can do, and their sum, the ideal;
//   2. data parallel with the uniform split (train.balance none);
//   3. static shares at the declared speeds 1,<slow share> (train.balance static);
//   4. dynamic shares from even ones (train.balance dynamic).
// Each turn's tokens/s is over its last --steps steps, after --warmup; the dynamic turn also reports
// the shares it settled on and the step of its last change. With --slowdown FROM,TO a last turn runs
// dynamic shares with replica 1 unlimited but for steps FROM … TO − 1, and reports how many steps the
// shares took to follow the slowdown's start and its end.
//
//   troupe bench balance                                # small, 12 micro-batches of 1 a step
//   troupe bench balance --model tiny --steps 4 --warmup 5
//   troupe bench balance --slowdown 20,60

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>

#include "actors/worker/data_parallel_hooks.hpp"
#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/bench_rank.hpp"
#include "apps/bench/cpu_quota.hpp"
#include "apps/exit_codes.hpp"
#include "compute/train/balance.hpp"

namespace troupe::apps {
namespace {

using Clock = std::chrono::steady_clock;

// What one turn gives: its tokens/s over the measured steps, the shares it ended with, and (dynamic)
// the step after which they last changed and how many changes there were.
struct TurnFigures {
  double tokens_per_second = 0;
  std::vector<int> shares;
  int settled_after = 0;
  int changes = 0;
};

// Trains warmup + steps steps as `options` say; the measured part starts after `warmup`.
TurnFigures run_turn(compute::Backend& backend, const compute::GPTConfig& cfg, compute::TrainerOptions options,
                     const std::vector<std::uint16_t>& stream, const BenchBalanceOptions& o) {
  BenchTraining training(backend, cfg, std::move(options), stream);
  TurnFigures figures;
  Clock::time_point start = Clock::now();
  for (int step = 0; step < o.warmup + o.steps; ++step) {
    if (step == o.warmup) start = Clock::now();
    const compute::StepResult r = training.step();
    if (r.shares_changed) {
      figures.settled_after = step + 1;
      ++figures.changes;
    }
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  figures.tokens_per_second = static_cast<double>(training.trainer().tokens_per_step()) * o.steps / seconds;
  figures.shares = training.trainer().micro_shares();
  return figures;
}

// The slowdown turn: dynamic shares from even ones, replica 1 held to its quota for steps
// [from, to) only (1-based), 10 steps more after. Rank 0's figures: the first change at or after
// each end of the slowdown, as (its step, replica 0's share), (−1, 0) where none came; then replica
// 0's share after the slowdown's last step and after the turn's last step (where the shares stood).
std::vector<double> slowdown_turn(compute::Backend& backend, const compute::GPTConfig& cfg,
                                  compute::TrainerOptions options, const std::vector<std::uint16_t>& stream,
                                  const CpuQuota* quota, int rank, int from, int to) {
  BenchTraining training(backend, cfg, std::move(options), stream);
  std::vector<double> figures{-1, 0, -1, 0, 0, 0};
  auto hold = [&](bool held) {
    if (quota && rank == 1) (void)quota->hold(held);
  };
  hold(false);
  for (int step = 1; step <= to + 10; ++step) {
    if (step == from) hold(true);
    if (step == to) hold(false);
    const bool changed = training.step().shares_changed;
    if (step == to - 1) figures[4] = training.trainer().micro_shares()[0];
    if (step == to + 10) figures[5] = training.trainer().micro_shares()[0];
    if (!changed || step < from) continue;
    const std::size_t edge = step < to ? 0 : 2;
    if (figures[edge] >= 0) continue;
    figures[edge] = step;
    figures[edge + 1] = training.trainer().micro_shares()[0];
  }
  hold(true);
  return figures;
}

// A rank's report: its tokens/s alone; rank 0 adds, per data-parallel turn, its tokens/s and shares,
// and the dynamic turn's settling, then the slowdown turn's figures.
Expected<std::vector<double>> balance_rank(comm::Engine& engine, const BenchBalanceOptions& o,
                                           const compute::GPTConfig& cfg, const std::vector<std::uint16_t>& stream,
                                           const CpuQuota* quota) {
  const int rank = engine.rank();
  if (quota && rank == 1)
    if (Status joined = quota->join(::getpid()); !joined) return joined.error();
  auto backend = compute::make_backend(compute::BackendKind::cpu, compute::Precision::fp32, 1);
  if (!backend) return backend.error();
  auto joined = BenchRank::join(engine, 2);
  if (!joined) return joined.error();
  BenchRank& worker = **joined;
  const compute::DataParallel dp =
      actors::group_data_parallel(worker.mailbox(), worker.group(), worker.progress(), compute::ZeroStage::none,
                                  compute::ParameterLayout(cfg).total());
  const int steps = o.warmup + o.steps;
  auto options = [&](compute::DataParallel data_parallel) {
    compute::TrainerOptions t = bench_trainer_options(cfg, o.batch, steps, std::move(data_parallel));
    t.grad_accum = o.grad_accum;
    return t;
  };
  std::vector<double> report{run_turn(**backend, cfg, options({}), stream, o).tokens_per_second};
  dp.sum(0);  // both alone turns done before the group trains
  const double speeds[] = {1.0, o.slow_share};
  auto declared = compute::proportional_shares(2 * o.grad_accum, speeds);
  if (!declared) return declared.error();
  for (compute::BalanceMode mode : compute::balance_modes) {
    compute::TrainerOptions t = options(dp);
    if (mode == compute::BalanceMode::fixed) t.micro_shares = *declared;
    if (mode == compute::BalanceMode::dynamic) {
      t.micro_shares = {o.grad_accum, o.grad_accum};
      t.balance_window = o.window;
    }
    const TurnFigures figures = run_turn(**backend, cfg, std::move(t), stream, o);
    if (rank != 0) continue;
    const std::vector<int> shares =
        figures.shares.empty() ? std::vector<int>{o.grad_accum, o.grad_accum} : figures.shares;
    report.insert(report.end(),
                  {figures.tokens_per_second, static_cast<double>(shares[0]), static_cast<double>(shares[1]),
                   static_cast<double>(figures.settled_after), static_cast<double>(figures.changes)});
  }
  if (o.slowdown_from > 0) {
    compute::TrainerOptions t = options(dp);
    t.micro_shares = {o.grad_accum, o.grad_accum};
    t.balance_window = o.window;
    t.lr.total_steps = o.slowdown_to + 10;
    const std::vector<double> followed =
        slowdown_turn(**backend, cfg, std::move(t), stream, quota, rank, o.slowdown_from, o.slowdown_to);
    if (rank == 0) report.insert(report.end(), followed.begin(), followed.end());
  }
  return report;
}

}  // namespace

int run_bench_balance(const BenchBalanceOptions& o) {
  const compute::GPTConfig cfg = *compute::gpt_preset(o.model);
  const int units = 2 * o.grad_accum;
  std::printf(
      "bench balance: %s (%d layers), 2 replicas (1 process x 1 thread each), %d micro-batches of %d x seq %d a "
      "step, %d steps measured after %d; load average %.2f at the start\n",
      o.model.c_str(), cfg.n_layer, units, o.batch, cfg.block_size, o.steps, o.warmup, load_average());
  std::optional<CpuQuota> quota;
  if (auto created = CpuQuota::create("bench-balance", o.slow_share); created) {
    quota.emplace(std::move(*created));
    std::printf("replica 1 held to %.0f %% of a core: %s\n", 100 * o.slow_share, quota->describe().c_str());
  } else {
    std::printf("replica 1 not held to %.0f %% of a core, it runs on a whole one: %s\n", 100 * o.slow_share,
                created.error().message.c_str());
  }
  std::fflush(stdout);
  const std::vector<std::uint16_t> stream =
      bench_tokens(cfg, static_cast<std::size_t>(o.batch) * cfg.block_size * units * 4 + 1);
  const CpuQuota* held = quota ? &*quota : nullptr;
  auto results = run_bench_ranks(2, [&](comm::Engine& engine) { return balance_rank(engine, o, cfg, stream, held); });
  if (!results) return error_exit(ExitCode::failure, results.error().message);
  constexpr std::size_t per_turn = 5;
  const std::size_t modes = std::size(compute::balance_modes);
  for (std::size_t r = 0; r < results->size(); ++r) {
    const comm::LocalRankResult& result = (*results)[r];
    const std::size_t expected = r == 0 ? 1 + per_turn * modes + (o.slowdown_from > 0 ? 6 : 0) : 1;
    if (!result.ok || result.report.size() != expected * sizeof(double))
      return error_exit(ExitCode::failure, "bench balance: rank " + std::to_string(r) + ": " +
                                               (result.error.empty() ? "reported no figures" : result.error));
  }
  const std::vector<double> lead = unpack_figures((*results)[0].report);
  const double alone[] = {lead[0], unpack_figures((*results)[1].report)[0]};
  const double ideal = alone[0] + alone[1];
  std::printf("%-10s %-10s %10s\n", "turn", "shares", "tokens/s");
  std::printf("%-10s %-10s %10.0f\n", "alone 0", "-", alone[0]);
  std::printf("%-10s %-10s %10.0f\n", "alone 1", "-", alone[1]);
  double uniform = 0;
  for (std::size_t m = 0; m < modes; ++m) {
    const double* turn = &lead[1 + per_turn * m];
    const int shares[] = {static_cast<int>(turn[1]), static_cast<int>(turn[2])};
    std::printf("%-10s %-10s %10.0f\n", std::string(compute::balance_mode_name(compute::balance_modes[m])).c_str(),
                compute::shares_text(shares).c_str(), turn[0]);
    if (compute::balance_modes[m] == compute::BalanceMode::none) uniform = turn[0];
  }
  const double* dynamic = &lead[1 + per_turn * (modes - 1)];
  std::printf("dynamic / uniform: %.2fx (target >= 1.3x)\n", dynamic[0] / uniform);
  std::printf("dynamic / ideal: %.2f (ideal = alone 0 + alone 1 = %.0f tokens/s; target >= 0.9)\n", dynamic[0] / ideal,
              ideal);
  std::printf(
      "dynamic settled on replica 0 taking %.0f of %d micro-batches (%.1f %%) against the speed ratio %.1f %% "
      "(alone 0 / ideal), after step %.0f (%.0f change(s), window %d)\n",
      dynamic[1], units, 100 * dynamic[1] / units, 100 * alone[0] / ideal, dynamic[3], dynamic[4], o.window);
  if (o.slowdown_from > 0) {
    const double* slowed = &lead[1 + per_turn * modes];
    auto shares_of = [&](double share) {
      const int shares[] = {static_cast<int>(share), units - static_cast<int>(share)};
      return compute::shares_text(shares);
    };
    auto followed = [&](int edge, int at) {
      const double step = slowed[edge], share = slowed[edge + 1];
      if (step < 0) return std::string("no change");
      return "shares " + shares_of(share) + " after step " + std::to_string(static_cast<int>(step)) + " (" +
             std::to_string(static_cast<int>(step) - at + 1) + " step(s))";
    };
    std::printf("slowdown of replica 1 from step %d to step %d: followed by %s; its end by %s\n", o.slowdown_from,
                o.slowdown_to, followed(0, o.slowdown_from).c_str(), followed(2, o.slowdown_to).c_str());
    std::printf("shares after step %d, the slowdown's last: %s; after step %d: %s\n", o.slowdown_to - 1,
                shares_of(slowed[4]).c_str(), o.slowdown_to + 10, shares_of(slowed[5]).c_str());
  }
  return to_int(ExitCode::success);
}

Command add_bench_balance_command(CLI::App& bench) {
  auto options = std::make_shared<BenchBalanceOptions>();
  CLI::App* command =
      bench.add_subcommand("balance", "Data-parallel shares by speed: uniform, static, dynamic, one replica slowed.");
  add_model_option(*command, options->model);
  add_rank_batch_option(*command, options->batch);
  command->add_option("--grad-accum", options->grad_accum, "micro-batches a replica takes in the uniform split")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command->add_option("--slow-share", options->slow_share, "share of a core replica 1 is held to (its declared speed)")
      ->check(CLI::Range(0.05, 1.0))
      ->capture_default_str();
  command->add_option("--window", options->window, "train.balance_window of the dynamic turn")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  add_iteration_options(*command, options->steps, "a step of each turn", options->warmup);
  command->add_option("--slowdown", options->slowdown,
                      "FROM,TO: a last dynamic turn with replica 1 held for steps FROM to TO - 1 only");
  return refusing_unknown(*command, [options] {
    if (!options->slowdown.empty()) {
      char rest = 0;
      if (std::sscanf(options->slowdown.c_str(), "%d,%d%c", &options->slowdown_from, &options->slowdown_to, &rest) !=
              2 ||
          options->slowdown_from < 1 || options->slowdown_to <= options->slowdown_from)
        return error_exit(ExitCode::bad_input, "--slowdown '" + options->slowdown +
                                                   "': give the steps the slowdown starts and ends at, FROM,TO with "
                                                   "1 <= FROM < TO");
    }
    return run_bench_balance(*options);
  });
}

}  // namespace troupe::apps
