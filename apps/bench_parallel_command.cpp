// troupe bench allreduce / troupe bench dp: the data plane and data-parallel training, each as a
// ratio against a reference measured in the same run. Ranks are forked by comm's local
// bootstrap, so these run before this process starts any thread.
//
// bench dp: `small` (by default) on n processes × 1 thread against 1 process × 1 thread, same
// micro-batch per rank; scaling = DP tokens/s ÷ (n × single tokens/s), measured in alternating
// rounds because a shared machine's speed drifts more between runs than DP costs. Each round
// also runs the n processes at once without summing gradients: what the machine gives n
// processes (shared caches, memory bandwidth, the host's scheduling of the vCPUs), so the gap
// between DP and one process splits into the machine's share and communication's.

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "actors/actor_system_setup.hpp"
#include "actors/data_parallel_hooks.hpp"
#include "actors/mailbox_comm.hpp"
#include "apps/commands.hpp"
#include "comm/bench/allreduce_bench.hpp"
#include "comm/bootstrap.hpp"
#include "comm/collectives.hpp"
#include "comm/grid.hpp"
#include "compute/random.hpp"
#include "compute/train/trainer.hpp"

namespace troupe::apps {
namespace {

using Clock = std::chrono::steady_clock;

// Whether the ranks of a run sum their gradients (data parallelism) or train side by side, each
// on its own (the machine's reference for n processes at once).
enum class Ranks { data_parallel, independent };

// One rank's median step time in seconds, as the bootstrap's report bytes. The rank trains as a
// worker actor does in a job: collectives posted from an actor, completions in its mailbox.
Expected<std::vector<std::uint8_t>> dp_rank_body(comm::Engine& engine, const BenchDpOptions& o, Ranks ranks) {
  const compute::GPTConfig cfg = *compute::gpt_preset(o.model);
  auto backend = compute::make_backend("cpu", 1);
  if (!backend) return backend.error();
  const int world = ranks == Ranks::data_parallel ? engine.world_size() : 1;
  const int rank = ranks == Ranks::data_parallel ? engine.rank() : 0;
  actors::TroupeConfig actor_config;
  caf::actor_system system{actor_config};
  caf::scoped_actor worker{system};
  actors::MailboxComm mailbox(worker.ptr());
  monitor::WorkProgress progress;
  std::unique_ptr<comm::Communicator> comm;
  compute::DataParallel dp;
  if (world > 1) {
    auto created = comm::Communicator::create(engine, comm::dp_group(comm::Grid{world, 1, 1}, rank));
    if (!created) return created.error();
    comm = std::move(*created);
    dp = actors::group_data_parallel(mailbox, *comm, progress, 0, compute::ParameterLayout(cfg).total());
  }
  std::vector<std::uint16_t> stream(static_cast<std::size_t>(o.batch) * cfg.block_size * world * 4 + 1);
  for (std::size_t i = 0; i < stream.size(); ++i)
    stream[i] = static_cast<std::uint16_t>(compute::splitmix64(i) % static_cast<std::uint64_t>(cfg.vocab_size));
  compute::GPT model(cfg, **backend);
  model.init_parameters(1);
  compute::TrainerOptions options;
  options.batch_size = o.batch;
  options.seq_len = cfg.block_size;
  options.lr = {1e-4, 1e-5, 0, o.warmup + o.steps};
  options.data_parallel = dp;
  compute::Trainer trainer(model, options, stream, stream);
  for (int i = 0; i < o.warmup; ++i) trainer.step();
  std::vector<double> seconds;
  for (int i = 0; i < o.steps; ++i) {
    auto start = Clock::now();
    trainer.step();
    seconds.push_back(std::chrono::duration<double>(Clock::now() - start).count());
  }
  std::sort(seconds.begin(), seconds.end());
  double median = seconds[seconds.size() / 2];
  std::vector<std::uint8_t> bytes(sizeof median);
  std::memcpy(bytes.data(), &median, sizeof median);
  return bytes;
}

// The slowest rank's median step of a run on `world` forked processes.
Expected<double> median_step(int world, const BenchDpOptions& o, Ranks ranks) {
  auto results = comm::run_local_ranks(
      world, [&o, ranks](comm::Engine& engine) { return dp_rank_body(engine, o, ranks); }, std::chrono::minutes(10));
  if (!results) return results.error();
  double slowest = 0;
  for (std::size_t r = 0; r < results->size(); ++r) {
    const auto& result = (*results)[r];
    if (!result.ok || result.report.size() != sizeof(double))
      return Error{"rank " + std::to_string(r) + " of " + std::to_string(world) + ": " + result.error};
    double median = 0;
    std::memcpy(&median, result.report.data(), sizeof median);
    slowest = std::max(slowest, median);
  }
  return slowest;
}

}  // namespace

int run_bench_allreduce(const comm::AllReduceBenchOptions& options) {
  auto report = comm::bench_allreduce(options);
  if (!report) {
    std::fprintf(stderr, "troupe: error: %s\n", report.error().message.c_str());
    return 1;
  }
  std::fputs(comm::format_allreduce_report(*report).c_str(), stdout);
  return 0;
}

int run_bench_dp(const BenchDpOptions& options) {
  const compute::GPTConfig cfg = *compute::gpt_preset(options.model);
  std::printf("bench dp: %s, micro-batch %d x seq %d per rank, 1 thread per process, median of %d steps, %d rounds\n",
              options.model.c_str(), options.batch, cfg.block_size, options.steps, options.rounds);
  std::printf("(each round measures 1 process, then %d independent ones at once (no gradient sum: what the\n"
              " machine gives %d processes), then %d in data parallel; the machine's speed drifts between runs,\n"
              " so the figure is the median of the rounds' ratios; scaling = dp / (%d x 1 proc))\n",
              options.processes, options.processes, options.processes, options.processes);
  std::printf("%-6s %14s %18s %14s %10s %14s\n", "round", "1 proc tok/s", "independent tok/s", "dp tok/s",
              "scaling", "dp/independent");
  std::fflush(stdout);
  const double tokens = static_cast<double>(options.batch) * cfg.block_size;
  std::vector<double> ratios;
  for (int round = 1; round <= options.rounds; ++round) {
    auto single = median_step(1, options, Ranks::data_parallel);
    if (!single) return std::fprintf(stderr, "troupe: error: %s\n", single.error().message.c_str()), 1;
    auto independent = median_step(options.processes, options, Ranks::independent);
    if (!independent) return std::fprintf(stderr, "troupe: error: %s\n", independent.error().message.c_str()), 1;
    auto parallel = median_step(options.processes, options, Ranks::data_parallel);
    if (!parallel) return std::fprintf(stderr, "troupe: error: %s\n", parallel.error().message.c_str()), 1;
    const double single_tps = tokens / *single, independent_tps = tokens * options.processes / *independent,
                 parallel_tps = tokens * options.processes / *parallel;
    ratios.push_back(parallel_tps / (options.processes * single_tps));
    std::printf("%-6d %14.0f %18.0f %14.0f %10.3f %14.3f\n", round, single_tps, independent_tps, parallel_tps,
                ratios.back(), parallel_tps / independent_tps);
    std::fflush(stdout);
  }
  std::sort(ratios.begin(), ratios.end());
  std::printf("scaling (%d processes x 1 thread vs 1 x 1, median of rounds) = %.3f\n", options.processes,
              ratios[ratios.size() / 2]);
  return 0;
}

}  // namespace troupe::apps
