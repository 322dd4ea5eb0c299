// troupe bench sim-check: does the sim backend, given this machine's figures, predict what the
// CPU backend does on it? Four forked runs, one after another: the model in data parallel over
// `processes` ranks (bench dp's layout) on the CPU backend, each rank first measuring, while the
// others do the same, its sgemm peak and copy bandwidth (one thread, on the thread's CPU time, so
// that other work on the machine does not lower them) and the loopback link through the engine's
// all-reduce (a few floats for the latency of a message, the gradients' size for the
// bandwidth); the model in 1F1B over `stages` stages (bench pipeline's layout) on the CPU backend;
// then both layouts on the sim backend with sim.flops = the sgemm peak, sim.memory_bandwidth =
// the copy bandwidth and every link at the measured bandwidth and latency. A layout's step time is
// the median over steps of its slowest rank's, on the wall clock: on a busy machine the measured
// one waits for cores the simulated one does not. Beside the measured one, the busiest rank's
// process CPU seconds in the step (all its threads): what the step costs without waiting for
// cores, nor for the other ranks (so without the pipeline's bubble). Rank 0 of each data-parallel run also times one
// more step op by op, the CPU's ops on its thread's CPU time and the sim's on its modelled clock:
// where the model is off whatever else the machine runs.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "actors/worker/data_parallel_hooks.hpp"
#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/bench_rank.hpp"
#include "apps/bench/bench_stage.hpp"
#include "apps/bench/op_timing_backend.hpp"
#include "apps/exit_codes.hpp"
#include "comm/bootstrap.hpp"
#include "compute/cpu/copy_bandwidth.hpp"
#include "compute/cpu/sgemm_peak.hpp"
#include "compute/sim/sim_backend.hpp"
#include "schedules/generate.hpp"

namespace troupe::apps {
namespace {

enum class Layout { data_parallel, pipeline };

// One rank's view of this machine: FLOP/s, bytes/s, bytes/s and seconds a message.
struct MachineFigures {
  double sgemm = 0, copy = 0, link_bandwidth = 0, link_latency = 0;
};

double timed_all_reduce(comm::Communicator& group, compute::Tensor& buffer) {
  const auto start = std::chrono::steady_clock::now();
  TROUPE_CHECK(static_cast<bool>(group.all_reduce(buffer)), "sim-check: an all-reduce of the link's measure failed");
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The median of `reps` all-reduces of `buffer` after two unmeasured ones, every one entered together.
double all_reduce_seconds(comm::Communicator& group, compute::Tensor buffer, int reps) {
  std::vector<double> seconds;
  for (int i = 0; i < reps + 2; ++i) {
    TROUPE_CHECK(static_cast<bool>(group.barrier()), "sim-check: a barrier of the link's measure failed");
    const double t = timed_all_reduce(group, buffer);
    if (i >= 2) seconds.push_back(t);
  }
  return median(seconds);
}

// A ring all-reduce over n ranks is 2 (n − 1) messages after one another, each of 1/n of the buffer:
// a buffer of n floats gives a message's latency, one of the gradients' size the bandwidth.
MachineFigures measure_machine(comm::Communicator& group, std::int64_t gradient_floats) {
  MachineFigures figures;
  figures.sgemm = compute::cpu::measure_sgemm_peak({512, 1024}, compute::cpu::CpuClock::thread_cpu);
  figures.copy = compute::cpu::measure_copy_bandwidth(std::size_t{64} << 20, compute::cpu::CpuClock::thread_cpu);
  const int n = static_cast<int>(group.group().ranks.size());
  const double hops = 2.0 * (n - 1);
  figures.link_latency = all_reduce_seconds(group, compute::Tensor::zeros({n}, compute::DType::f32), 20) / hops;
  const compute::Tensor gradients = compute::Tensor::zeros({gradient_floats}, compute::DType::f32);
  const double hop = all_reduce_seconds(group, gradients, 5) / hops;
  figures.link_bandwidth = static_cast<double>(gradients.nbytes()) / n / std::max(hop - figures.link_latency, 1e-9);
  return figures;
}

struct RankRun {
  Layout layout;
  const BenchSimCheckOptions& options;
  const schedules::Schedule& schedule;
  const schedules::CheckReport& check;
  std::optional<compute::SimOptions> sim;  // none: the CPU backend, measuring the machine first
};

// What a rank reports, as text lines: "machine" and its four figures (the CPU backend in data
// parallel only), "steps" and the measured steps' wall seconds, "cpu" and the process's CPU
// seconds in each, then "op", a name and its seconds for
// each op of one more step timed op by op (data parallel only; the modelled seconds on the sim).
std::vector<std::uint8_t> text_report(const std::optional<MachineFigures>& machine, const std::vector<double>& steps,
                                      const std::vector<double>& cpu, const std::map<std::string, double>& ops) {
  std::ostringstream out;
  out.precision(17);
  if (machine)
    out << "machine " << machine->sgemm << ' ' << machine->copy << ' ' << machine->link_bandwidth << ' '
        << machine->link_latency << '\n';
  out << "steps";
  for (double s : steps) out << ' ' << s;
  out << "\ncpu";
  for (double s : cpu) out << ' ' << s;
  out << '\n';
  for (const auto& [name, seconds] : ops) out << "op " << name << ' ' << seconds << '\n';
  const std::string text = out.str();
  return {text.begin(), text.end()};
}

struct RankReport {
  std::optional<MachineFigures> machine;
  std::vector<double> steps, cpu;
  std::map<std::string, double> ops;
};

RankReport read_report(const std::vector<std::uint8_t>& bytes) {
  std::istringstream in(std::string(bytes.begin(), bytes.end()));
  RankReport report;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    std::string kind;
    fields >> kind;
    if (kind == "machine") {
      MachineFigures m;
      fields >> m.sgemm >> m.copy >> m.link_bandwidth >> m.link_latency;
      report.machine = m;
    } else if (kind == "steps") {
      for (double s; fields >> s;) report.steps.push_back(s);
    } else if (kind == "cpu") {
      for (double s; fields >> s;) report.cpu.push_back(s);
    } else if (kind == "op") {
      std::string name;
      double seconds = 0;
      fields >> name >> seconds;
      report.ops[name] = seconds;
    }
  }
  return report;
}

Expected<std::vector<std::uint8_t>> rank_body(comm::Engine& engine, const RankRun& run) {
  const BenchSimCheckOptions& o = run.options;
  std::unique_ptr<compute::Backend> inner;
  std::function<double()> clock = [] { return compute::cpu::clock_seconds(compute::cpu::CpuClock::thread_cpu); };
  if (run.sim) {
    auto sim = std::make_unique<compute::SimBackend>(*run.sim);
    clock = [modelled = sim.get()] { return modelled->modelled_seconds(); };
    inner = std::move(sim);
  } else {
    auto cpu = compute::make_backend(compute::BackendKind::cpu, compute::Precision::fp32, 1);
    if (!cpu) return cpu.error();
    inner = std::move(*cpu);
  }
  OpTimingBackend backend(
      *inner, [] {}, clock);
  const compute::GPTConfig cfg = *compute::gpt_preset(o.model);
  const int steps = o.warmup + o.steps;
  std::optional<MachineFigures> machine;
  std::vector<double> times, cpu;
  const auto timed = [&](const std::function<double()>& step) {
    const double start = compute::cpu::clock_seconds(compute::cpu::CpuClock::process_cpu);
    times.push_back(step());
    cpu.push_back(compute::cpu::clock_seconds(compute::cpu::CpuClock::process_cpu) - start);
  };
  if (run.layout == Layout::data_parallel) {
    auto joined = BenchRank::join(engine, o.processes);
    if (!joined) return joined.error();
    BenchRank& worker = **joined;
    const std::int64_t parameters = compute::ParameterLayout(cfg).total();
    if (!run.sim) machine = measure_machine(worker.group(), parameters);
    const std::vector<std::uint16_t> stream =
        bench_tokens(cfg, static_cast<std::size_t>(o.batch) * cfg.block_size * 4 + 1);
    BenchTraining training(backend, cfg, o.batch, steps + 1, stream,
                           actors::group_data_parallel(worker.mailbox(), worker.group(), worker.progress(),
                                                       compute::ZeroStage::none, parameters));
    for (int i = 0; i < steps; ++i) timed([&] { return training.timed_step(); });
    backend.set_timing(true);
    training.timed_step();
  } else {
    auto stage = BenchStage::create(engine, backend, {cfg, o.stages, o.microbatches, o.stage_batch, steps},
                                    run.schedule, run.check);
    if (!stage) return stage.error();
    for (int i = 0; i < steps; ++i) timed([&] { return (*stage)->timed_step(); });
  }
  times.erase(times.begin(), times.begin() + o.warmup);
  cpu.erase(cpu.begin(), cpu.begin() + o.warmup);
  return text_report(machine, times, cpu, backend.seconds());
}

struct LayoutRun {
  double step_seconds = 0;            // median over steps of the slowest rank's
  double cpu_seconds = 0;             // median over steps of the busiest rank's process CPU seconds
  MachineFigures machine;             // the ranks' mean, when measured
  std::map<std::string, double> ops;  // rank 0's, when timed
};

Expected<LayoutRun> run_layout(const RankRun& run) {
  const BenchSimCheckOptions& o = run.options;
  const int ranks = run.layout == Layout::data_parallel ? o.processes : o.stages;
  std::optional<comm::WireModel> wire;
  if (run.sim)
    wire = comm::WireModel{0,
                           ranks,
                           run.sim->link_bandwidth_intra,
                           run.sim->link_bandwidth_inter,
                           run.sim->link_latency_intra,
                           run.sim->link_latency_inter};
  auto results = comm::run_local_ranks(
      ranks, [&](comm::Engine& engine) { return rank_body(engine, run); }, std::chrono::minutes(30), {}, wire);
  if (!results) return results.error();
  // A rank whose body failed comes first: the others were killed for it.
  for (std::size_t r = 0; r < results->size(); ++r) {
    const auto& result = (*results)[r];
    if (result.reported && !result.ok)
      return Error{"rank " + std::to_string(r) + " of " + std::to_string(ranks) + ": " + result.error};
  }
  LayoutRun out;
  std::vector<double> slowest(static_cast<std::size_t>(o.steps), 0.0), busiest(slowest);
  for (std::size_t r = 0; r < results->size(); ++r) {
    const auto& result = (*results)[r];
    const RankReport report = result.ok ? read_report(result.report) : RankReport{};
    if (report.steps.size() != slowest.size() || report.cpu.size() != busiest.size())
      return Error{"rank " + std::to_string(r) + " of " + std::to_string(ranks) + ": " +
                   (result.ok              ? std::string("reported no step times")
                    : result.error.empty() ? "died"
                                           : result.error)};
    if (report.machine) {
      out.machine.sgemm += report.machine->sgemm / ranks;
      out.machine.copy += report.machine->copy / ranks;
      out.machine.link_bandwidth += report.machine->link_bandwidth / ranks;
      out.machine.link_latency += report.machine->link_latency / ranks;
    }
    if (r == 0) out.ops = report.ops;
    for (std::size_t s = 0; s < slowest.size(); ++s) {
      slowest[s] = std::max(slowest[s], report.steps[s]);
      busiest[s] = std::max(busiest[s], report.cpu[s]);
    }
  }
  out.step_seconds = median(slowest);
  out.cpu_seconds = median(busiest);
  return out;
}

// Rank 0's data-parallel step op by op, largest measured first: where the model is off.
void print_ops(const std::map<std::string, double>& measured, const std::map<std::string, double>& simulated) {
  std::vector<std::pair<std::string, double>> ops(measured.begin(), measured.end());
  std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::printf(
      "one data-parallel step of rank 0, op by op (the CPU's on its thread's CPU time):\n%-28s %11s %12s %13s\n", "op",
      "measured ms", "modelled ms", "sim/measured");
  for (const auto& [name, seconds] : ops) {
    const auto found = simulated.find(name);
    const double modelled = found == simulated.end() ? 0.0 : found->second;
    std::printf("%-28s %11.3f %12.3f %13.3f\n", name.c_str(), seconds * 1e3, modelled * 1e3, modelled / seconds);
  }
}

}  // namespace

int run_bench_sim_check(const BenchSimCheckOptions& o) {
  auto schedule = schedules::generate_schedule(schedules::ScheduleKind::one_f_one_b, o.stages, o.microbatches, 1);
  if (!schedule) return error_exit(ExitCode::bad_input, "bench sim-check: " + schedule.error().message);
  auto check = schedules::check_schedule(*schedule);
  if (!check) return error_exit(ExitCode::failure, "bench sim-check: " + check.error().message);
  std::printf("bench sim-check: %s, 1 thread a rank, %d steps after %d warm-up per layout and backend\n",
              o.model.c_str(), o.steps, o.warmup);
  std::fflush(stdout);

  const auto run = [&](Layout layout, const std::optional<compute::SimOptions>& sim) -> Expected<LayoutRun> {
    auto done = run_layout({layout, o, *schedule, *check, sim});
    if (!done)
      return Error{"on the " + std::string(sim ? "sim" : "cpu") + " backend in " +
                   (layout == Layout::data_parallel ? "data parallel" : "the pipeline") + ": " + done.error().message};
    return done;
  };
  auto measured_dp = run(Layout::data_parallel, std::nullopt);
  if (!measured_dp) return error_exit(ExitCode::failure, "bench sim-check: " + measured_dp.error().message);
  const MachineFigures& m = measured_dp->machine;
  std::printf(
      "this machine, a rank's thread on its CPU time while %d ran at once: sgemm peak %.1f GFLOP/s, copy %.2f GB/s; "
      "loopback link "
      "%.2f GB/s, %.1f us a message\n",
      o.processes, m.sgemm * 1e-9, m.copy * 1e-9, m.link_bandwidth * 1e-9, m.link_latency * 1e6);
  std::fflush(stdout);
  const compute::SimOptions sim{m.sgemm, m.copy, m.link_bandwidth, m.link_bandwidth, m.link_latency, m.link_latency};
  auto measured_pp = run(Layout::pipeline, std::nullopt);
  auto simulated_dp = measured_pp ? run(Layout::data_parallel, sim) : measured_pp;
  auto simulated_pp = simulated_dp ? run(Layout::pipeline, sim) : simulated_dp;
  if (!simulated_pp) return error_exit(ExitCode::failure, "bench sim-check: " + simulated_pp.error().message);

  print_ops(measured_dp->ops, simulated_dp->ops);
  std::printf("%-28s %11s %12s %12s %13s\n", "layout", "measured s", "its CPU s", "simulated s", "sim/measured");
  const std::string dp_name = "dp " + std::to_string(o.processes) + " x batch " + std::to_string(o.batch);
  const std::string pp_name = "pipeline 1f1b " + std::to_string(o.stages) + " x " + std::to_string(o.microbatches) +
                              " x batch " + std::to_string(o.stage_batch);
  for (const auto& [name, measured, simulated] : {std::tuple{dp_name, *measured_dp, simulated_dp->step_seconds},
                                                  std::tuple{pp_name, *measured_pp, simulated_pp->step_seconds}})
    std::printf("%-28s %11.4f %12.4f %12.4f %13.3f\n", name.c_str(), measured.step_seconds, measured.cpu_seconds,
                simulated, simulated / measured.step_seconds);
  return to_int(ExitCode::success);
}

Command add_bench_sim_check_command(CLI::App& bench) {
  auto options = std::make_shared<BenchSimCheckOptions>();
  CLI::App* command =
      bench.add_subcommand("sim-check", "The sim backend given this machine's figures against the CPU backend.");
  add_model_option(*command, options->model);
  add_rank_batch_option(*command, options->batch);
  command->add_option("--processes", options->processes, "data-parallel processes")
      ->check(CLI::Range(2, 64))
      ->capture_default_str();
  command->add_option("--stages", options->stages, "pipeline stages (1F1B)")
      ->check(CLI::Range(2, 16))
      ->capture_default_str();
  command->add_option("--microbatches", options->microbatches, "the pipeline's micro-batches a step")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  command->add_option("--stage-batch", options->stage_batch, "the pipeline's micro-batch size")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  add_iteration_options(*command, options->steps, "a step of a layout on a backend", options->warmup);
  return refusing_unknown(*command, [options] { return run_bench_sim_check(*options); });
}

}  // namespace troupe::apps
