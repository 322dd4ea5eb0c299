// troupe bench cp: a narrow model's long sequences split over C context shards, ring and
// all_to_all (docs/context-parallel.md), against one process training the whole sequence, in the
// same run, step by step.
//
//   troupe bench cp --seqs 4096,8192,16384 --shards 2
//
// As in bench tp, the VM drifts by more than the differences measured, so the C + 1 processes
// live at once and take turns (bench_turns.hpp), one step each, in an order that rotates: rank C
// alone on the whole sequence (the reference), and ranks 0..C-1 as the context shards of one
// replica, once by ring and once by all-to-all (where C divides the heads). Each side runs
// compute::Trainer on the same micro-batch of one sequence, the shards' exchanges going through
// the comm engine and the worker's mailbox as a job's do (actors/worker/mailbox_context_exchange).
//
// Per side and sequence length the bench prints:
//   tokens/s   T / the step's seconds (the slowest shard's);
//   scaling    tokens/s of the C shards / (C × tokens/s of the one process), within each iteration;
//   act/rank   what a rank's first step leaves allocated besides the model states: the memory
//              ledger's activations (and other tensors), plus what it holds outside the ledger (the
//              context layers' kept out, lse or q/k/v: the heap in use less the ledger's growth);
//   hidden     for the ring: 1 − (the forward's wait in finish_shift per shift) / (one shift of the
//              same block with nothing computed between begin and finish), medians over the steps.
// A C above this machine's cores runs oversubscribed, and the header says so.

#include <malloc.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include "actors/worker/data_parallel_hooks.hpp"
#include "actors/worker/mailbox_context_exchange.hpp"
#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/bench_rank.hpp"
#include "apps/bench/bench_turns.hpp"
#include "apps/exit_codes.hpp"
#include "comm/bootstrap.hpp"
#include "comm/grid.hpp"
#include "compute/context/context_split.hpp"
#include "compute/memory_ledger.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::apps {
namespace {

using Clock = std::chrono::steady_clock;
using compute::context::ContextMethod;

enum class CpTurn : int { single, ring, all_to_all, stop };

constexpr std::array<std::array<CpTurn, 3>, 3> cp_turn_orders{{
    {CpTurn::single, CpTurn::ring, CpTurn::all_to_all},
    {CpTurn::ring, CpTurn::all_to_all, CpTurn::single},
    {CpTurn::all_to_all, CpTurn::single, CpTurn::ring},
}};

// A shard's exchange that times each ring shift's wait in finish_shift, in call order.
class TimedExchange final : public compute::context::ContextExchange {
 public:
  explicit TimedExchange(ContextExchange& inner) : inner_(inner) {}
  int rank() const override { return inner_.rank(); }
  int shards() const override { return inner_.shards(); }
  Status begin_shift(std::span<const std::byte> send, std::span<std::byte> recv) override {
    return inner_.begin_shift(send, recv);
  }
  Status finish_shift() override {
    const auto start = Clock::now();
    Status done = inner_.finish_shift();
    waits.push_back(seconds_since(start));
    return done;
  }
  Status begin_all_to_all(std::span<const std::byte> send, std::span<const std::size_t> send_bytes,
                          std::span<std::byte> recv, std::span<const std::size_t> recv_bytes) override {
    return inner_.begin_all_to_all(send, send_bytes, recv, recv_bytes);
  }
  Status finish_all_to_all() override { return inner_.finish_all_to_all(); }
  std::vector<double> waits;  // seconds, one per shift since the last clear

 private:
  ContextExchange& inner_;
};

// What a rank's first step leaves allocated besides the model states (see the header).
class HeldSince {
 public:
  HeldSince() : ledger_(ledger_bytes()), heap_(heap_bytes()), activations_(activation_bytes()) {}
  double bytes() const {
    const double outside_ledger = (heap_bytes() - heap_) - (ledger_bytes() - ledger_);
    return activation_bytes() - activations_ + std::max(0.0, outside_ledger);
  }

 private:
  static double ledger_bytes() { return double(compute::memory_ledger().report().total.bytes); }
  static double activation_bytes() {
    const compute::MemoryReport r = compute::memory_ledger().report();
    return double(r[compute::MemoryKind::activations].bytes + r[compute::MemoryKind::other].bytes);
  }
  static double heap_bytes() {
    const struct mallinfo2 m = mallinfo2();
    return double(m.uordblks + m.hblkhd);
  }
  double ledger_, heap_, activations_;
};

// Per side: step seconds of the measured iterations, then the held bytes; the ring's also the
// forward's wait per shift, each step's median, and one free shift's seconds.
enum Figure : int { ring_seconds, all_to_all_seconds, forward_wait, figures };

struct CpBench {
  const BenchCpOptions& o;
  compute::GPTConfig cfg;
  bool all_to_all = false;  // C divides the heads
  std::vector<std::uint16_t> stream;
  int iterations() const { return o.warmup + o.steps; }
};

// The reference: the whole sequence in one process; its step seconds, then its held bytes.
std::vector<double> cp_lead(Turns<CpTurn>& turns, compute::Backend& backend, const CpBench& b) {
  HeldSince before;
  BenchTraining alone(backend, b.cfg, 1, b.iterations() + 1, b.stream, {});
  alone.timed_step();  // the first step allocates what the rank keeps
  const double held = before.bytes();
  turns.wait_for_followers();  // all built: nobody computes while the reference is measured
  std::vector<double> single = turns.lead_rounds(
      cp_turn_orders, b.iterations(), b.o.warmup, CpTurn::single, [&] { return alone.timed_step(); },
      [&](CpTurn turn) { return turn == CpTurn::all_to_all && !b.all_to_all; });
  single.push_back(held);
  return single;
}

double median_of(std::vector<double> values) { return values.empty() ? 0 : median(std::move(values)); }

// A context shard: its figures, each a run of `steps` values, then one free shift's seconds, the
// ring's held bytes and the all-to-all's.
Expected<std::vector<double>> cp_follow(comm::Engine& engine, Turns<CpTurn>& turns, compute::Backend& backend,
                                        const CpBench& b) {
  const int C = b.o.shards, own = engine.rank();
  auto joined = BenchRank::join(engine, C);
  if (!joined) return joined.error();
  BenchRank& worker = **joined;
  comm::Group group{comm::context_group_id, {}};  // ranks 0 … C − 1
  for (int r = 0; r < C; ++r) group.ranks.push_back(r);
  actors::MailboxContextExchange mailbox_exchange(worker.mailbox(), engine, std::move(group));
  TimedExchange exchange(mailbox_exchange);
  const compute::context::ContextSplit split = compute::context::make_context_split(b.cfg.block_size, C).value();
  // One forward block's shift with nothing to hide it behind, the median of a few.
  const std::size_t block = std::size_t(split.local_rows()) * 2 * b.cfg.n_embd;
  std::vector<float> send(block, 1.0f), recv(block);
  auto free_shift = [&]() -> Expected<double> {
    std::vector<double> seconds;
    for (int i = 0; i < 21; ++i) {
      const auto start = Clock::now();
      if (Status s = mailbox_exchange.begin_shift(compute::context::bytes_of(send.data(), block),
                                                  compute::context::writable_bytes_of(recv.data(), block));
          !s)
        return s.error();
      if (Status s = mailbox_exchange.finish_shift(); !s) return s.error();
      seconds.push_back(seconds_since(start));
    }
    return median(seconds);
  };
  auto side = [&](ContextMethod method, double& held) {
    HeldSince before;
    auto training = std::make_unique<BenchTraining>(
        backend, b.cfg, 1, b.iterations() + 1, b.stream,
        actors::group_data_parallel(worker.mailbox(), worker.group(), worker.progress(), compute::ZeroStage::none,
                                    compute::ParameterLayout(b.cfg).total()),
        compute::ContextShardGroup{method, split, &exchange});
    training->timed_step();
    held = before.bytes();
    return training;
  };
  // What the exchange (its kept buffers), the data-parallel sums and the comm engine allocate once
  // goes to sides built, stepped and dropped first, so neither measured side counts it.
  double ring_held = 0, all_to_all_held = 0;
  side(ContextMethod::ring, ring_held).reset();
  if (b.all_to_all) side(ContextMethod::all_to_all, all_to_all_held).reset();
  auto ring = side(ContextMethod::ring, ring_held);
  std::unique_ptr<BenchTraining> all_to_all;
  if (b.all_to_all) all_to_all = side(ContextMethod::all_to_all, all_to_all_held);

  std::array<std::vector<double>, figures> measured;
  const std::size_t forward_shifts = std::size_t(b.cfg.n_layer) * (C - 1);
  turns.finish();
  int taken = 0;
  const int turns_per_iteration = b.all_to_all ? 2 : 1;
  for (CpTurn turn = turns.next(own); turn != CpTurn::stop; turn = turns.next(own)) {
    const bool counted = taken++ >= turns_per_iteration * b.o.warmup;
    exchange.waits.clear();
    const double seconds = (turn == CpTurn::ring ? ring : all_to_all)->timed_step();
    if (counted) {
      measured[turn == CpTurn::ring ? ring_seconds : all_to_all_seconds].push_back(seconds);
      if (turn == CpTurn::ring)
        measured[forward_wait].push_back(
            median_of({exchange.waits.begin(),
                       exchange.waits.begin() + std::ptrdiff_t(std::min(forward_shifts, exchange.waits.size()))}));
    }
    turns.finish();
  }
  auto shift_seconds = free_shift();  // the reference idles: nothing else computes
  if (!shift_seconds) return shift_seconds.error();
  std::vector<double> report;
  for (Figure f : {ring_seconds, all_to_all_seconds, forward_wait}) {
    measured[f].resize(std::size_t(b.o.steps), 0.0);
    report.insert(report.end(), measured[f].begin(), measured[f].end());
  }
  report.push_back(*shift_seconds);
  report.push_back(ring_held);
  report.push_back(all_to_all_held);
  return report;
}

// One sequence length: the table's rows, or an error naming the rank that failed.
Status bench_length(const BenchCpOptions& o, int T) {
  CpBench b{o, *compute::gpt_preset("tiny"), o.heads % o.shards == 0, {}};
  b.cfg.n_layer = o.layers;
  b.cfg.n_embd = o.channels;
  b.cfg.n_head = o.heads;
  b.cfg.block_size = T;
  b.stream = bench_tokens(b.cfg, std::size_t(T) * 4 + 1);
  const int C = o.shards;
  Turns<CpTurn> turns(C);
  auto results = run_lead_and_followers(
      C, [&](compute::Backend& backend) { return cp_lead(turns, backend, b); },
      [&](comm::Engine& engine, compute::Backend& backend) { return cp_follow(engine, turns, backend, b); });
  if (!results) return results.error();
  std::vector<std::vector<double>> shards;
  std::vector<double> single;
  for (std::size_t r = 0; r < results->size(); ++r) {
    const auto& result = (*results)[r];
    const bool reference = int(r) == C;
    const std::size_t expected = std::size_t(o.steps) * (reference ? 1 : figures) + (reference ? 1 : 3);
    if (!result.ok || result.report.size() != expected * sizeof(double))
      return Error{"bench cp: T " + std::to_string(T) + ", rank " + std::to_string(r) + " of " + std::to_string(C + 1) +
                   ": " + (result.error.empty() ? "reported no figures" : result.error)};
    (reference ? single : shards.emplace_back()) = unpack_figures(result.report);
  }
  auto at = [&](const std::vector<double>& report, Figure f, int i) { return report[std::size_t(f * o.steps + i)]; };
  const double free_shift = shards.front()[std::size_t(figures * o.steps)];
  const double single_held = single.back();

  std::vector<double> single_tps, ring_tps, ring_scaling, a2a_tps, a2a_scaling, hidden;
  for (int i = 0; i < o.steps; ++i) {
    double ring = 0, a2a = 0, wait = 0;
    for (const auto& report : shards) {
      ring = std::max(ring, at(report, ring_seconds, i));
      a2a = std::max(a2a, at(report, all_to_all_seconds, i));
      wait += at(report, forward_wait, i) / C;
    }
    single_tps.push_back(T / single[std::size_t(i)]);
    ring_tps.push_back(T / ring);
    ring_scaling.push_back(ring_tps.back() / (C * single_tps.back()));
    if (b.all_to_all) {
      a2a_tps.push_back(T / a2a);
      a2a_scaling.push_back(a2a_tps.back() / (C * single_tps.back()));
    }
    hidden.push_back(1 - wait / free_shift);
  }
  double ring_held = 0, a2a_held = 0;
  for (const auto& report : shards) {
    ring_held = std::max(ring_held, report[report.size() - 2]);
    a2a_held = std::max(a2a_held, report.back());
  }
  const std::string hidden_text = [&] {
    char text[64];
    std::snprintf(text, sizeof text, "%.3f", median(hidden));
    return std::string(text);
  }();
  auto row = [&](const char* side, int c, double tps, double scaling, double held, const std::string& hide) {
    std::printf("%6d  %-11s %2d  %10.0f  %8.3f  %12.2f  %9.3f  %s\n", T, side, c, tps, scaling, mib(held),
                held / single_held, hide.c_str());
  };
  row("one process", 1, median(single_tps), 1.0, single_held, "-");
  row("ring", C, median(ring_tps), median(ring_scaling), ring_held, hidden_text);
  if (b.all_to_all)
    row("all_to_all", C, median(a2a_tps), median(a2a_scaling), a2a_held, "-");
  else
    std::printf("%6d  %-11s %2d  (C does not divide the %d heads)\n", T, "all_to_all", C, o.heads);
  std::printf(
      "        ring: one free shift of a forward block %.3f ms; the forward's wait per shift, median of "
      "steps, %.3f ms\n",
      free_shift * 1e3, median(hidden) >= 1 ? 0.0 : (1 - median(hidden)) * free_shift * 1e3);
  std::fflush(stdout);
  return Status::success();
}

}  // namespace

int run_bench_cp(const BenchCpOptions& o) {
  if (o.channels % o.heads != 0)
    return error_exit(ExitCode::bad_input, "bench cp --channels " + std::to_string(o.channels) +
                                               " is not a multiple of --heads " + std::to_string(o.heads));
  for (int T : o.seqs)
    if (T % (2 * o.shards) != 0)
      return error_exit(ExitCode::bad_input, "bench cp --seqs " + std::to_string(T) +
                                                 " does not split into 2 x --shards = " + std::to_string(2 * o.shards) +
                                                 " equal chunks");
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  std::printf(
      "bench cp: %d layers, n_embd %d, %d heads, byte vocabulary, micro-batch 1 sequence, %d context shards "
      "x 1 thread against 1 process x 1 thread, %d iterations after %d warm-up%s\n",
      o.layers, o.channels, o.heads, o.shards, o.steps, o.warmup,
      o.shards > cores
          ? (", oversubscribed: " + std::to_string(o.shards) + " shards on " + std::to_string(cores) + " cores").c_str()
          : "");
  std::printf(
      "(%d + 1 processes take turns, one step each; scaling = tokens/s at C / (C x tokens/s at 1); act/rank = "
      "what a rank's first step leaves allocated besides parameters, gradients and AdamW: the ledger's "
      "activations + the context state outside it; hidden = share of the ring forward's shift time not "
      "waited for)\n",
      o.shards);
  std::printf("%6s  %-11s %2s  %10s  %8s  %12s  %9s  %s\n", "T", "side", "C", "tokens/s", "scaling", "act/rank MiB",
              "act vs 1", "hidden");
  std::fflush(stdout);
  for (int T : o.seqs)
    if (Status done = bench_length(o, T); !done) return error_exit(ExitCode::failure, done.error().message);
  return to_int(ExitCode::success);
}

Command add_bench_cp_command(CLI::App& bench) {
  auto options = std::make_shared<BenchCpOptions>();
  CLI::App* command = bench.add_subcommand(
      "cp", "Context shards (ring, all_to_all) of long sequences against one process, in turns: tokens/s, memory.");
  command->add_option("--layers", options->layers, "transformer blocks")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command->add_option("--channels", options->channels, "n_embd")->check(CLI::Range(8, 4096))->capture_default_str();
  command->add_option("--heads", options->heads, "attention heads")->check(CLI::Range(1, 64))->capture_default_str();
  command->add_option("--seqs", options->seqs, "sequence lengths, one table row group each")
      ->check(CLI::Range(4, 1 << 20))
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--shards", options->shards, "context shards C")->check(CLI::Range(2, 16))->capture_default_str();
  add_iteration_options(*command, options->steps, "a step of every side", options->warmup);
  return refusing_unknown(*command, [options] { return run_bench_cp(*options); });
}

}  // namespace troupe::apps
