// troupe bench diloco: what DiLoCo buys across a slow link. Two ranks train one model in three
// modes, each mode's steps in a turn of their own: plain data parallelism (f32 gradient sums every
// step), PowerSGD gradient sums, and DiLoCo with each rank an island (Streaming DiLoCo: F fragments
// synced H steps apart each, overlapped d steps with the next steps, pseudo-gradients in bf16, or
// as --precision says).
// With --hosts 2 the ranks run on two hosts simulated by scripts/netns-cluster.sh (root; `up 2`),
// over TCP through the hosts' bridge: first as the link is, then with both directions of each
// host's link shaped to --rate by tc tbf; else once, over this host's shared memory.
//
//   scripts/netns-cluster.sh up 2 && troupe bench diloco --hosts 2
//
// Bytes per step are what each rank's sums carried (the buffers summed; a 2-rank ring sends and
// receives each once, and a 2-rank all-gather of int8 payloads sends one): plain the f32 gradients,
// PowerSGD its factors, DiLoCo every fragment's pseudo-gradients divided by the steps. Tokens/s over a turn's measured
// steps, the slower rank's.

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "actors/worker/data_parallel_hooks.hpp"
#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/bench_rank.hpp"
#include "apps/bench/simulated_hosts.hpp"
#include "apps/config/named_choice.hpp"
#include "apps/exit_codes.hpp"
#include "comm/bootstrap.hpp"
#include "comm/gradient_compressor.hpp"
#include "compute/train/outer_step.hpp"

namespace troupe::apps {
namespace {

constexpr int ranks = 2;
constexpr int modes = 3;  // plain, PowerSGD, DiLoCo
constexpr std::array<const char*, modes> mode_names{"plain", "powersgd", "diloco"};

// A rank's report: each mode's measured seconds, then each mode's bytes per step.
Expected<std::vector<double>> run_rank(comm::Engine& engine, const compute::GPTConfig& cfg, const BenchDilocoOptions& o,
                                       compute::OuterPrecision precision, const std::vector<std::uint16_t>& stream) {
  auto backend = compute::make_backend(compute::BackendKind::cpu, compute::Precision::fp32, 1);
  if (!backend) return backend.error();
  auto joined = BenchRank::join(engine, ranks);
  if (!joined) return joined.error();
  BenchRank& rank = **joined;
  const compute::ParameterLayout layout(cfg);
  const int steps = o.warmup + o.steps;
  auto compressor = actors::gradient_compressor(rank.mailbox(), rank.group(), rank.progress(),
                                                {comm::Compression::powersgd, o.powersgd_rank, 0, 1},
                                                actors::gradient_tensors(layout.views()));
  auto data_parallel = [&](std::shared_ptr<comm::GradientCompressor> c) {
    return actors::group_data_parallel(rank.mailbox(), rank.group(), rank.progress(), compute::ZeroStage::none,
                                       layout.total(), std::move(c));
  };
  BenchTraining plain(**backend, cfg, o.batch, steps, stream, data_parallel(nullptr));
  BenchTraining powersgd(**backend, cfg, o.batch, steps, stream, data_parallel(compressor));
  BenchTraining island(**backend, cfg, o.batch, steps, stream, {});  // alone: an island of one rank
  const std::vector<compute::ParameterUnit> units = compute::GPT::parameter_units(cfg);
  compute::OuterStep outer(island.model().params(), {o.every, 0.7, 0.9, precision,
                                                     compute::outer_fragments(units, o.fragments, o.every), o.overlap});
  const compute::IslandGroup islands =
      actors::island_hooks(rank.mailbox(), rank.group(), rank.progress(), rank.group().position(), precision);
  double diloco_bytes = 0;
  const double bytes_per_value = compute::outer_precision_bytes(precision);
  // One DiLoCo step of the island: its inner step, then the outer step's work after it.
  auto diloco_step = [&](long step, bool measured) {
    const double seconds = island.timed_step();
    const auto start = std::chrono::steady_clock::now();
    // Never the run's last step (steps + 1): a turn ends by land_in_flight, not by syncing every fragment.
    const std::vector<int> landed = outer.after_step(step, steps + 1, island.model().params(), islands);
    if (measured)
      for (int f : landed)
        diloco_bytes += bytes_per_value * static_cast<double>(outer.fragments()[static_cast<std::size_t>(f)].size());
    return seconds + std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<double> report;
  for (int mode = 0; mode < modes; ++mode) {
    double seconds = 0;
    for (int i = 0; i < steps; ++i) {
      if (i == 0 || i == o.warmup)
        if (Status s = rank.group().barrier(); !s) return s.error();
      const bool measured = i >= o.warmup;
      const double step_seconds = mode == 0   ? plain.timed_step()
                                  : mode == 1 ? powersgd.timed_step()
                                              : diloco_step(i + 1, measured);
      if (measured) seconds += step_seconds;
    }
    // The turn ends with no sum in flight, so the next mode's steps do not wait for one.
    if (mode == 2) {
      const auto start = std::chrono::steady_clock::now();
      for (int f : outer.land_in_flight(island.model().params(), islands))
        diloco_bytes += bytes_per_value * static_cast<double>(outer.fragments()[static_cast<std::size_t>(f)].size());
      seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    report.push_back(seconds);
  }
  report.push_back(static_cast<double>(layout.total()) * sizeof(float));
  report.push_back(static_cast<double>(compressor->totals().wire_bytes.load()) / steps);
  report.push_back(diloco_bytes / o.steps);
  return report;
}

// One run of the three modes' turns over the link as it is now; each mode's tokens/s and bytes per step.
Expected<std::vector<double>> run_turns(const compute::GPTConfig& cfg, const BenchDilocoOptions& o,
                                        compute::OuterPrecision precision, const std::vector<std::uint16_t>& stream) {
  comm::RankPlacement place;
  if (o.hosts > 1) place = [](int rank) { return enter_simulated_host(rank); };
  auto results = run_bench_ranks(
      ranks, [&](comm::Engine& engine) { return run_rank(engine, cfg, o, precision, stream); }, place);
  if (!results) return results.error();
  std::vector<std::vector<double>> reports;
  for (std::size_t r = 0; r < results->size(); ++r) {
    const auto& result = (*results)[r];
    if (!result.ok || result.report.size() != 2 * modes * sizeof(double))
      return Error{"bench diloco: rank " + std::to_string(r) + " of " + std::to_string(ranks) + ": " +
                   (result.error.empty() ? "reported no figures" : result.error) +
                   (result.signal != 0 ? " (signal " + std::to_string(result.signal) + ")" : "")};
    reports.push_back(unpack_figures(result.report));
  }
  const double tokens = static_cast<double>(ranks) * o.batch * cfg.block_size * o.steps;
  std::vector<double> figures;
  for (int mode = 0; mode < modes; ++mode) {
    double slowest = 0;
    for (const auto& report : reports) slowest = std::max(slowest, report[static_cast<std::size_t>(mode)]);
    figures.push_back(tokens / slowest);
  }
  for (int mode = 0; mode < modes; ++mode) figures.push_back(reports[0][static_cast<std::size_t>(modes + mode)]);
  return figures;
}

void print_turns(const char* link, const std::vector<double>& figures) {
  std::printf("%-18s %-9s %16s %14s %12s %14s\n", "link", "mode", "bytes per step", "fewer bytes", "tok/s",
              "tok/s / plain");
  for (int mode = 0; mode < modes; ++mode) {
    const double bytes = figures[static_cast<std::size_t>(modes + mode)], tps = figures[static_cast<std::size_t>(mode)];
    std::printf("%-18s %-9s %16.0f %13.1fx %12.0f %14.3f\n", link, mode_names[static_cast<std::size_t>(mode)], bytes,
                figures[modes] / bytes, tps, tps / figures[0]);
  }
}

}  // namespace

int run_bench_diloco(BenchDilocoOptions o) {
  const compute::GPTConfig cfg = *compute::gpt_preset(o.model);
  if (o.overlap < 0) o.overlap = o.every / o.fragments - 1;
  if (o.fragments > cfg.n_layer || o.fragments > o.every || o.overlap >= o.every / o.fragments)
    return error_exit(ExitCode::bad_input, "bench diloco: --fragments " + std::to_string(o.fragments) +
                                               " and --overlap " + std::to_string(o.overlap) +
                                               " need fragments <= the model's " + std::to_string(cfg.n_layer) +
                                               " blocks and <= --every, and overlap < every / fragments");
  const auto precision = parse_choice<compute::OuterPrecision>(o.precision);
  if (!precision)
    return error_exit(ExitCode::bad_input, "bench diloco: --precision: expected " +
                                               choice_list<compute::OuterPrecision>() + ", got '" + o.precision + "'");
  auto hosts = usable_simulated_hosts("bench diloco", o.hosts);
  if (!hosts) return error_exit(ExitCode::bad_input, hosts.error().message);
  o.hosts = *hosts;
  std::printf(
      "bench diloco: %s, %d ranks %s, micro-batch %d x seq %d per rank, 1 thread per process; each mode %d steps "
      "after %d warm-up, in turns\n(plain f32 sums, PowerSGD rank %d, DiLoCo: 2 islands, H %ld, %d fragments, "
      "overlap %ld, %s pseudo-gradients)\n",
      o.model.c_str(), ranks, o.hosts > 1 ? "on simulated hosts h0 and h1 (TCP)" : "on this host", o.batch,
      cfg.block_size, o.steps, o.warmup, o.powersgd_rank, o.every, o.fragments, o.overlap, o.precision.c_str());
  std::fflush(stdout);
  const std::vector<std::uint16_t> stream =
      bench_tokens(cfg, static_cast<std::size_t>(o.batch) * cfg.block_size * 4 + 1);
  std::vector<std::string> links{"as it is"};
  if (o.hosts > 1) links.push_back(o.rate);
  std::vector<std::vector<double>> turns;
  for (const std::string& link : links) {
    if (o.hosts > 1) {
      if (Status shaped = shape_simulated_hosts(o.hosts, link == "as it is" ? "" : link); !shaped)
        return error_exit(ExitCode::failure, shaped.error().message);
    }
    auto figures = run_turns(cfg, o, *precision, stream);
    if (o.hosts > 1) (void)shape_simulated_hosts(o.hosts, "");
    if (!figures) return error_exit(ExitCode::failure, figures.error().message);
    print_turns(link.c_str(), *figures);
    std::fflush(stdout);
    turns.push_back(*figures);
  }
  if (turns.size() == 2)
    std::printf("diloco at %s: %.1fx fewer bytes than plain, %.2fx its tokens/s, %.2fx its own unshaped tokens/s\n",
                o.rate.c_str(), turns[1][modes] / turns[1][modes + 2], turns[1][2] / turns[1][0],
                turns[1][2] / turns[0][2]);
  std::printf(
      "targets at 20 Mbit/s: DiLoCo >= 100x fewer bytes per step than plain, >= 5x its tokens/s and >= 0.9x its "
      "own unshaped tokens/s\n");
  return to_int(ExitCode::success);
}

Command add_bench_diloco_command(CLI::App& bench) {
  auto options = std::make_shared<BenchDilocoOptions>();
  CLI::App* command = bench.add_subcommand(
      "diloco",
      "Plain data parallelism, PowerSGD and Streaming DiLoCo on 2 ranks in turns, unshaped and over a shaped link: "
      "bytes and tokens/s.");
  add_model_option(*command, options->model);
  add_rank_batch_option(*command, options->batch);
  add_iteration_options(*command, options->steps, "steps of each mode per turn", options->warmup);
  command->add_option("--powersgd-rank", options->powersgd_rank, "PowerSGD's r")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command->add_option("--every", options->every, "DiLoCo's H: inner steps between a fragment's syncs")
      ->check(CLI::Range(1L, 10000L))
      ->capture_default_str();
  command->add_option("--precision", options->precision, "the pseudo-gradients on the wire: f32, bf16 or int8")
      ->capture_default_str();
  command->add_option("--fragments", options->fragments, "Streaming DiLoCo's fragments F")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  command->add_option("--overlap", options->overlap, "steps a fragment's sum is in flight; -1 = H/F - 1")
      ->check(CLI::Range(-1L, 10000L))
      ->capture_default_str();
  command
      ->add_option("--hosts", options->hosts,
                   "2: the ranks on two hosts simulated by scripts/netns-cluster.sh (root), unshaped then shaped; "
                   "1: this host")
      ->check(CLI::Range(1, 2))
      ->capture_default_str();
  command->add_option("--rate", options->rate, "the shaped turn's link, a tc rate (20mbit, 100mbit, 1gbit)")
      ->check(CLI::Validator(
          [](const std::string& rate) {
            return std::regex_match(rate, std::regex("[0-9]+(\\.[0-9]+)?[kmg]?(bit|bps)"))
                       ? std::string()
                       : "a tc rate such as 20mbit, not '" + rate + "'";
          },
          "RATE"))
      ->capture_default_str();
  return refusing_unknown(*command, [options] { return run_bench_diloco(*options); });
}

}  // namespace troupe::apps
