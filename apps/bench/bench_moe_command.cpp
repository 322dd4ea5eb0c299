// troupe bench moe: expert parallelism on a model with experts (docs/moe.md), in one run.
//
//   troupe bench moe --model moe-small --shards 2
//
// EP + 1 processes live at once and take turns (bench_turns.hpp), as in bench cp: ranks 0..EP-1
// are one expert group (and its data-parallel group), rank EP trains alone with every expert.
//
//   exchange  the all-to-all that dispatches one MoE block's rows (a rank's B·T·k rows of C floats,
//             split evenly over the group) against an all-reduce of the same buffer over the same
//             ranks, each the median of the measured iterations; bus bandwidth as nccl-tests count
//             it: the all-to-all moves (EP−1)/EP of the buffer off each rank, the all-reduce
//             2(EP−1)/EP of it;
//   training  one step of the expert group (each rank its own micro-batch, its E/EP experts) and one
//             of the process alone (one micro-batch, all E experts), in an order that rotates:
//             tokens/s and scaling = tokens/s of the group / (EP × tokens/s alone), per iteration;
//   balance   the process alone then trains `balance_steps` steps twice from the same start, with
//             the load-balancing loss at --aux-coef and without it: the most loaded expert's
//             token-slots over the mean, in the worst MoE block, over each run's last steps.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "actors/worker/data_parallel_hooks.hpp"
#include "actors/worker/mailbox_context_exchange.hpp"
#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_expert_products.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/bench_rank.hpp"
#include "apps/bench/bench_turns.hpp"
#include "apps/exit_codes.hpp"
#include "comm/bootstrap.hpp"
#include "comm/grid.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::apps {
namespace {

using Clock = std::chrono::steady_clock;

enum class MoeTurn : int { single, experts, exchange, stop };

constexpr std::array<std::array<MoeTurn, 2>, 2> moe_turn_orders{{
    {MoeTurn::single, MoeTurn::experts},
    {MoeTurn::experts, MoeTurn::single},
}};

struct MoeBench {
  const BenchMoeOptions& o;
  compute::GPTConfig cfg;
  std::vector<std::uint16_t> stream;
  int iterations() const { return o.warmup + o.steps; }
  // One MoE block's dispatch buffer on a rank: B·T·k rows of C floats, rounded down to EP blocks.
  std::size_t exchange_floats() const {
    const std::size_t rows = std::size_t(o.batch) * std::size_t(cfg.block_size) * std::size_t(cfg.top_k);
    const std::size_t floats = rows * std::size_t(cfg.n_embd);
    return floats - floats % std::size_t(o.shards);
  }
};

// The reference's figures: its step seconds, then the balance runs' two load figures.
enum BalanceFigure : int { load_with_aux, load_without_aux, balance_figures };

// The most loaded expert over the mean in the worst block, of `runs` last steps' routing.
double worst_load(const std::vector<compute::GPTStage::MoERouting>& last_steps) {
  compute::GPTStage::MoERouting summed = last_steps.front();
  for (std::size_t i = 1; i < last_steps.size(); ++i) summed.add(last_steps[i], 1.0);
  return summed.load_imbalance();
}

// `steps` steps of one process from seed 1 at `aux_coef`; the load of its last quarter's steps.
double balance_run(compute::Backend& backend, const MoeBench& b, double aux_coef) {
  BenchTraining training(backend, b.cfg, b.o.batch, b.o.balance_steps, b.stream, {}, {}, {}, {aux_coef, b.o.z_coef});
  std::vector<compute::GPTStage::MoERouting> last;
  const int kept = std::max(1, b.o.balance_steps / 4);
  for (int s = 0; s < b.o.balance_steps; ++s) {
    compute::StepResult r = training.step();
    if (s >= b.o.balance_steps - kept) last.push_back(std::move(r.moe));
  }
  return worst_load(last);
}

std::vector<double> moe_lead(Turns<MoeTurn>& turns, compute::Backend& backend, const MoeBench& b) {
  std::vector<double> single;
  {
    BenchTraining alone(backend, b.cfg, b.o.batch, b.iterations() + 1, b.stream, {}, {}, {},
                        {b.o.aux_coef, b.o.z_coef});
    alone.timed_step();  // the first step allocates what the rank keeps
    turns.wait_for_followers();
    turns.hand_out(MoeTurn::exchange);  // nobody computes while the group exchanges
    single = turns.lead_rounds(moe_turn_orders, b.iterations(), b.o.warmup, MoeTurn::single,
                               [&] { return alone.timed_step(); });
  }
  single.push_back(balance_run(backend, b, b.o.aux_coef));
  single.push_back(balance_run(backend, b, 0.0));
  return single;
}

// What an expert-group rank reports: its step seconds (steps values), then the all-to-all's and the
// all-reduce's median seconds.
Expected<std::vector<double>> moe_follow(comm::Engine& engine, Turns<MoeTurn>& turns, compute::Backend& backend,
                                         const MoeBench& b) {
  const int EP = b.o.shards, own = engine.rank();
  auto joined = BenchRank::join(engine, EP);
  if (!joined) return joined.error();
  BenchRank& worker = **joined;
  comm::Group group{comm::context_group_id, {}};
  for (int r = 0; r < EP; ++r) group.ranks.push_back(r);
  actors::MailboxContextExchange exchange(worker.mailbox(), engine, std::move(group), comm::ExchangeGroup::expert);
  BenchTraining training(backend, b.cfg, b.o.batch, b.iterations() + 1, b.stream,
                         actors::group_data_parallel(worker.mailbox(), worker.group(), worker.progress(),
                                                     compute::ZeroStage::none, compute::ParameterLayout(b.cfg).total()),
                         {}, compute::ExpertGroup{&exchange}, {b.o.aux_coef, b.o.z_coef});
  training.timed_step();
  turns.finish();

  std::vector<double> seconds, a2a, all_reduce;
  for (MoeTurn turn = turns.next(own); turn != MoeTurn::stop; turn = turns.next(own)) {
    if (turn == MoeTurn::exchange) {
      const std::size_t floats = b.exchange_floats();
      std::vector<float> send(floats, 1.0f), recv(floats);
      const std::vector<std::size_t> blocks(std::size_t(EP), floats / std::size_t(EP) * sizeof(float));
      compute::Tensor summed = compute::Tensor::zeros({std::int64_t(floats)}, compute::DType::f32);
      for (int i = 0; i < b.iterations(); ++i) {
        auto start = Clock::now();
        if (Status s = exchange.all_to_all_uneven(compute::context::bytes_of(send.data(), floats), blocks,
                                                  compute::context::writable_bytes_of(recv.data(), floats), blocks);
            !s)
          return s.error();
        if (i >= b.o.warmup) a2a.push_back(seconds_since(start));
        start = Clock::now();
        if (Status s = worker.group().all_reduce(summed); !s) return s.error();
        if (i >= b.o.warmup) all_reduce.push_back(seconds_since(start));
      }
    } else {
      const double s = training.timed_step();
      if (seconds.size() < std::size_t(b.iterations())) seconds.push_back(s);
    }
    turns.finish();
  }
  seconds.erase(seconds.begin(), seconds.begin() + b.o.warmup);
  seconds.push_back(median(a2a));
  seconds.push_back(median(all_reduce));
  return seconds;
}

}  // namespace

int run_bench_moe(const BenchMoeOptions& o) {
  const auto preset = compute::gpt_preset(o.model);  // --model is checked to be a preset
  if (preset->experts == 0)
    return error_exit(ExitCode::bad_input,
                      "bench moe --model " + o.model + " has no experts (try moe-tiny or moe-small)");
  if (preset->experts % o.shards != 0)
    return error_exit(ExitCode::bad_input, "bench moe --shards " + std::to_string(o.shards) + " does not divide " +
                                               o.model + "'s " + std::to_string(preset->experts) + " experts");
  MoeBench b{o, *preset, {}};
  b.stream = bench_tokens(b.cfg, std::size_t(b.cfg.block_size) * std::size_t(o.batch) * 64 + 1);
  const int EP = o.shards;
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  std::printf(
      "bench moe: %s (%d experts, top-%d, an MoE block every %d), micro-batch %d x seq %d, %d expert shards x 1 "
      "thread against 1 process x 1 thread, %d iterations after %d warm-up%s\n",
      o.model.c_str(), b.cfg.experts, b.cfg.top_k, b.cfg.moe_every, o.batch, b.cfg.block_size, EP, o.steps, o.warmup,
      EP > cores
          ? (", oversubscribed: " + std::to_string(EP) + " shards on " + std::to_string(cores) + " cores").c_str()
          : "");
  std::fflush(stdout);
  Turns<MoeTurn> turns(EP);
  auto results = run_lead_and_followers(
      EP, [&](compute::Backend& backend) { return moe_lead(turns, backend, b); },
      [&](comm::Engine& engine, compute::Backend& backend) { return moe_follow(engine, turns, backend, b); });
  if (!results) return error_exit(ExitCode::failure, "bench moe: " + results.error().message);
  std::vector<std::vector<double>> shards;
  std::vector<double> single;
  for (std::size_t r = 0; r < results->size(); ++r) {
    const auto& result = (*results)[r];
    const bool reference = int(r) == EP;
    const std::size_t expected = std::size_t(o.steps) + 2;
    if (!result.ok || result.report.size() != expected * sizeof(double))
      return error_exit(ExitCode::failure, "bench moe: rank " + std::to_string(r) + " of " + std::to_string(EP + 1) +
                                               ": " + (result.error.empty() ? "reported no figures" : result.error));
    (reference ? single : shards.emplace_back()) = unpack_figures(result.report);
  }

  const double bytes = double(b.exchange_floats() * sizeof(float));
  double a2a = 0, all_reduce = 0;
  for (const auto& report : shards) {
    a2a = std::max(a2a, report[std::size_t(o.steps)]);
    all_reduce = std::max(all_reduce, report[std::size_t(o.steps) + 1]);
  }
  const double share = double(EP - 1) / EP;
  std::printf("exchange of %.2f MiB a rank (one MoE block's dispatch), median of %d:\n", bytes / (1024.0 * 1024.0),
              o.steps);
  std::printf("  %-11s %10s  %14s\n", "collective", "ms", "bus GB/s");
  std::printf("  %-11s %10.3f  %14.3f\n", "all-to-all", a2a * 1e3, share * bytes / a2a / 1e9);
  std::printf("  %-11s %10.3f  %14.3f\n", "all-reduce", all_reduce * 1e3, 2 * share * bytes / all_reduce / 1e9);
  std::printf("  all-to-all bus bandwidth over the all-reduce's: %.2f\n",
              (share * bytes / a2a) / (2 * share * bytes / all_reduce));

  const double tokens = double(o.batch) * b.cfg.block_size;
  std::vector<double> single_tps, group_tps, scaling;
  for (int i = 0; i < o.steps; ++i) {
    double slowest = 0;
    for (const auto& report : shards) slowest = std::max(slowest, report[std::size_t(i)]);
    single_tps.push_back(tokens / single[std::size_t(i)]);
    group_tps.push_back(EP * tokens / slowest);
    scaling.push_back(group_tps.back() / (EP * single_tps.back()));
  }
  std::printf("training (tokens/s, medians of the iterations):\n");
  std::printf("  %-20s %10.0f\n", "1 process", median(single_tps));
  std::printf("  %-20s %10.0f  scaling %.3f\n", ("expert shards " + std::to_string(EP)).c_str(), median(group_tps),
              median(scaling));
  const double with_aux = single[std::size_t(o.steps) + load_with_aux];
  const double without_aux = single[std::size_t(o.steps) + load_without_aux];
  std::printf(
      "load balance after %d steps from the same start (the most loaded expert's token-slots over the mean, worst "
      "MoE block, last %d steps; 1 = even, %d = every slot on one expert):\n",
      o.balance_steps, std::max(1, o.balance_steps / 4), b.cfg.experts);
  std::printf("  aux coefficient %-12g %8.3f\n", o.aux_coef, with_aux);
  std::printf("  aux coefficient %-12g %8.3f\n", 0.0, without_aux);
  std::fflush(stdout);

  // A rank's experts' products alone, on every core: the grouped products against one per expert,
  // at an even load and at the load without the auxiliary loss's order (half the slots on one expert).
  const std::int64_t slots = std::int64_t{o.batch} * b.cfg.block_size * b.cfg.top_k, E = b.cfg.experts;
  const std::vector<std::int64_t> even(std::size_t(E), slots / E);
  std::vector<std::int64_t> skewed(std::size_t(E), (slots - slots / 2) / (E - 1));
  skewed[0] = slots / 2;
  const int iterations = 2 * o.steps + 1;
  std::printf(
      "experts' products of one MoE block (c_fc, c_proj: forward, input and weight gradients), %d slots, %d threads, "
      "median of %d:\n",
      int(slots), cores, iterations);
  std::printf("  %-26s %10s %16s %8s\n", "load", "grouped ms", "per expert ms", "ratio");
  using Load = std::pair<const char*, const std::vector<std::int64_t>&>;
  for (const auto& [name, rows_of] : {Load{"even", even}, Load{"half on one expert", skewed}}) {
    const ExpertProductTimes t = time_expert_products(b.cfg, cores, rows_of, iterations);
    std::printf("  %-26s %10.2f %16.2f %8.3f\n", name, t.grouped_s * 1e3, t.per_expert_s * 1e3,
                t.per_expert_s / t.grouped_s);
  }
  std::printf("  (ratio: one product per expert's time over the grouped products')\n");
  std::fflush(stdout);
  return to_int(ExitCode::success);
}

Command add_bench_moe_command(CLI::App& bench) {
  auto options = std::make_shared<BenchMoeOptions>();
  CLI::App* command = bench.add_subcommand(
      "moe",
      "Expert shards against one process, in turns: all-to-all against all-reduce, tokens/s, load balance with "
      "and without the auxiliary loss.");
  add_model_option(*command, options->model);
  add_rank_batch_option(*command, options->batch);
  command->add_option("--shards", options->shards, "expert shards EP")->check(CLI::Range(2, 16))->capture_default_str();
  add_iteration_options(*command, options->steps, "a step of each side and one exchange of each kind", options->warmup);
  command->add_option("--balance-steps", options->balance_steps, "steps of each load-balance run")
      ->check(CLI::Range(1, 100000))
      ->capture_default_str();
  command->add_option("--aux-coef", options->aux_coef, "load-balancing loss coefficient (train.moe_aux_coef)")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  command->add_option("--z-coef", options->z_coef, "router z-loss coefficient (train.moe_z_coef)")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  return refusing_unknown(*command, [options] { return run_bench_moe(*options); });
}

}  // namespace troupe::apps
