// troupe bench compress: what gradient compression buys a data-parallel job. Two ranks keep three
// trainers of one model whose gradient sums differ: plain f32, bf16, and PowerSGD (error feedback,
// compressing from the first step). Every iteration steps the three in a rotating order, the ranks
// entering each step together (a barrier, untimed), so the three see the same machine and link
// (as bench zero3 does). With --hosts 2 the ranks run on two hosts simulated by
// scripts/netns-cluster.sh, over TCP through the hosts' bridge — shaped with `up 2 --rate 100mbit`
// — else over this host's shared memory. Bytes per step are what each rank's sums carried (the
// buffers summed; a 2-rank ring sends and receives each once).

#include <algorithm>
#include <array>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "actors/worker/data_parallel_hooks.hpp"
#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/bench_rank.hpp"
#include "apps/bench/simulated_hosts.hpp"
#include "apps/exit_codes.hpp"
#include "comm/bootstrap.hpp"
#include "comm/gradient_compressor.hpp"

namespace troupe::apps {
namespace {

constexpr int ranks = 2;
constexpr std::array<comm::Compression, 3> variants{comm::Compression::none, comm::Compression::bf16,
                                                    comm::Compression::powersgd};
constexpr int variant_count = static_cast<int>(variants.size());

// A rank's report: step seconds per variant and iteration (variant-major), then each variant's
// bytes per step.
Expected<std::vector<double>> run_rank(comm::Engine& engine, const compute::GPTConfig& cfg,
                                       const BenchCompressOptions& o, const std::vector<std::uint16_t>& stream) {
  auto backend = compute::make_backend(compute::BackendKind::cpu, compute::Precision::fp32, 1);
  if (!backend) return backend.error();
  auto joined = BenchRank::join(engine, ranks);
  if (!joined) return joined.error();
  BenchRank& rank = **joined;
  const compute::ParameterLayout layout(cfg);
  const int steps = o.warmup + o.steps;
  std::vector<std::shared_ptr<comm::GradientCompressor>> compressors;
  std::vector<std::unique_ptr<BenchTraining>> trainings;
  for (comm::Compression kind : variants) {
    std::shared_ptr<comm::GradientCompressor> compressor;
    if (kind != comm::Compression::none)
      compressor = actors::gradient_compressor(rank.mailbox(), rank.group(), rank.progress(),
                                               {kind, o.powersgd_rank, 0, 1}, actors::gradient_tensors(layout.views()));
    compressors.push_back(compressor);
    trainings.push_back(std::make_unique<BenchTraining>(
        **backend, cfg, o.batch, steps, stream,
        actors::group_data_parallel(rank.mailbox(), rank.group(), rank.progress(), compute::ZeroStage::none,
                                    layout.total(), compressor)));
  }
  std::vector<double> report(static_cast<std::size_t>(variant_count * o.steps));
  for (int i = 0; i < steps; ++i) {
    for (int turn = 0; turn < variant_count; ++turn) {
      const int v = (i + turn) % variant_count;
      if (Status s = rank.group().barrier(); !s) return s.error();
      const double seconds = trainings[static_cast<std::size_t>(v)]->timed_step();
      if (i >= o.warmup) report[static_cast<std::size_t>(v * o.steps + i - o.warmup)] = seconds;
    }
  }
  for (const auto& compressor : compressors) {
    const double plain_bytes_per_step = static_cast<double>(layout.total()) * sizeof(float);
    report.push_back(compressor ? static_cast<double>(compressor->totals().wire_bytes.load()) / steps
                                : plain_bytes_per_step);
  }
  return report;
}

}  // namespace

int run_bench_compress(BenchCompressOptions o) {
  const compute::GPTConfig cfg = *compute::gpt_preset(o.model);
  auto hosts = usable_simulated_hosts("bench compress", o.hosts);
  if (!hosts) return error_exit(ExitCode::bad_input, hosts.error().message);
  o.hosts = *hosts;
  std::printf(
      "bench compress: %s, %d ranks %s, micro-batch %d x seq %d per rank, 1 thread per process, %d "
      "iterations after %d warm-up\n(each iteration steps plain, bf16 and PowerSGD rank %d in a rotating "
      "order; ratios within each iteration)\n",
      o.model.c_str(), ranks, o.hosts > 1 ? "on simulated hosts h0 and h1 (TCP)" : "on this host", o.batch,
      cfg.block_size, o.steps, o.warmup, o.powersgd_rank);
  std::fflush(stdout);
  const std::vector<std::uint16_t> stream =
      bench_tokens(cfg, static_cast<std::size_t>(o.batch) * cfg.block_size * 4 + 1);
  comm::RankPlacement place;
  if (o.hosts > 1) place = [](int rank) { return enter_simulated_host(rank); };
  auto results = run_bench_ranks(
      ranks, [&](comm::Engine& engine) { return run_rank(engine, cfg, o, stream); }, place);
  if (!results) return error_exit(ExitCode::failure, results.error().message);
  const std::size_t expected = static_cast<std::size_t>(variant_count * (o.steps + 1));
  std::vector<std::vector<double>> reports;
  for (std::size_t r = 0; r < results->size(); ++r) {
    const auto& result = (*results)[r];
    if (!result.ok || result.report.size() != expected * sizeof(double))
      return error_exit(ExitCode::failure,
                        "bench compress: rank " + std::to_string(r) + " of " + std::to_string(ranks) + ": " +
                            (result.error.empty() ? "reported no step times" : result.error) +
                            (result.signal != 0 ? " (signal " + std::to_string(result.signal) + ")" : ""));
    reports.push_back(unpack_figures(result.report));
  }

  std::printf("%-9s %12s %12s %16s %12s %16s\n", "iteration", "plain tok/s", "bf16 tok/s", "PowerSGD tok/s",
              "bf16/plain", "PowerSGD/plain");
  const double tokens = static_cast<double>(ranks) * o.batch * cfg.block_size;
  std::vector<double> bf16_ratio, powersgd_ratio;
  std::array<std::vector<double>, 3> tps_of;
  for (int i = 0; i < o.steps; ++i) {
    std::array<double, 3> tps{};
    for (int v = 0; v < variant_count; ++v) {
      double slowest = 0;
      for (const auto& report : reports) slowest = std::max(slowest, report[static_cast<std::size_t>(v * o.steps + i)]);
      tps[static_cast<std::size_t>(v)] = tokens / slowest;
      tps_of[static_cast<std::size_t>(v)].push_back(tps[static_cast<std::size_t>(v)]);
    }
    bf16_ratio.push_back(tps[1] / tps[0]);
    powersgd_ratio.push_back(tps[2] / tps[0]);
    std::printf("%-9d %12.0f %12.0f %16.0f %12.3f %16.3f\n", i + 1, tps[0], tps[1], tps[2], bf16_ratio.back(),
                powersgd_ratio.back());
  }
  const std::size_t bytes_at = static_cast<std::size_t>(variant_count * o.steps);
  const std::vector<double>& rank0 = reports[0];
  std::printf("%-10s %16s %14s %12s %14s\n", "variant", "bytes per step", "fewer bytes", "tok/s", "tok/s / plain");
  for (int v = 0; v < variant_count; ++v) {
    const double bytes = rank0[bytes_at + static_cast<std::size_t>(v)];
    std::printf("%-10s %16.0f %13.1fx %12.0f %14.3f\n",
                std::string(comm::compression_name(variants[static_cast<std::size_t>(v)])).c_str(), bytes,
                rank0[bytes_at] / bytes, median(tps_of[static_cast<std::size_t>(v)]),
                v == 0 ? 1.0 : median(v == 1 ? bf16_ratio : powersgd_ratio));
  }
  std::printf(
      "targets over a 100 Mbit/s link: PowerSGD >= 20x fewer bytes and >= 1.4x the plain tokens/s, bf16 >= "
      "1.3x; unshaped, neither below 0.95x\n");
  return to_int(ExitCode::success);
}

Command add_bench_compress_command(CLI::App& bench) {
  auto options = std::make_shared<BenchCompressOptions>();
  CLI::App* command = bench.add_subcommand(
      "compress",
      "Data parallelism on 2 ranks with gradient sums plain, bf16 and PowerSGD, in turns: bytes and tokens/s.");
  add_model_option(*command, options->model);
  add_rank_batch_option(*command, options->batch);
  add_iteration_options(*command, options->steps, "one step of each variant", options->warmup);
  command->add_option("--powersgd-rank", options->powersgd_rank, "PowerSGD's r")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  command
      ->add_option("--hosts", options->hosts,
                   "2: the ranks on two hosts simulated by scripts/netns-cluster.sh (root); 1: this host")
      ->check(CLI::Range(1, 2))
      ->capture_default_str();
  return refusing_unknown(*command, [options] { return run_bench_compress(*options); });
}

}  // namespace troupe::apps
