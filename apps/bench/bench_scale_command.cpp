// troupe bench scale: how the control plane's costs grow with the ranks (docs/scale.md). Each N is
// a sim job on tiny (train.backend sim: compute modelled, runtime real) in node processes of
// --slots ranks, run through the drill's harness (apps/commands/drill/drill.hpp), so every figure
// comes from the job's events and the shell's answers, never from its log:
//   - an undisturbed run: launch to job_started (every rank joined), the job process's CPU per
//     second of training (its work then is the nodes' heartbeats), the shell's `status` and
//     `workers` round trips, the median step, a checkpoint's commit (the step's event to its
//     checkpoint_noted), resident memory of the job process and of the node processes per rank;
//   - the control plane's share of the step: how much of it the modelled step does not explain;
//   - a kill-node drill: detection, training going again in place, and the first step trained;
//     and the same drill with fault.recovery restart: the first step trained after every node
//     restarted.
// The last row is each figure's slope against N on log-log axes (least squares).

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/log_log_svg.hpp"
#include "apps/commands/drill/drill.hpp"
#include "apps/config/resolve.hpp"
#include "apps/exit_codes.hpp"
#include "comm/recursive_doubling.hpp"
#include "compute/model/gpt.hpp"
#include "compute/sim/sim_backend.hpp"
#include "compute/train/trainer.hpp"

namespace troupe::apps {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using actors::job_event;
using drill::body_is;

// The figures of one N; NaN where the run did not give one.
struct ScaleRow {
  int ranks = 0;
  int nodes = 0;
  std::vector<double> figures;
  std::string problem;  // why the row stopped short; empty when it did not
};

// The columns, in the order of ScaleRow::figures, and the file name of each one's plot.
struct Figure {
  const char* name;
  const char* file;
};
namespace column {
enum : std::size_t {
  joined,
  job_cpu,
  status,
  workers,
  step,
  plane,
  commit,
  detect,
  resume,
  recover,
  restart,
  job_memory,
  rank_memory
};
}  // namespace column
constexpr Figure figures[] = {{"joined s", "joined"},     {"job CPU/s", "job-cpu"}, {"status ms", "status"},
                              {"workers ms", "workers"},  {"step s", "step"},       {"plane %", "plane"},
                              {"commit s", "commit"},     {"detect s", "detect"},   {"resume s", "resume"},
                              {"recover s", "recover"},   {"restart s", "restart"}, {"job MiB", "job-memory"},
                              {"MiB/rank", "rank-memory"}};
constexpr std::size_t figure_count = std::size(figures);

double resident_mib(pid_t pid) {
  std::ifstream status("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  return NAN;
}

// User and system CPU seconds of a process so far.
double cpu_seconds(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  const std::size_t close = text.rfind(')');
  if (close == std::string::npos) return NAN;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  double ticks = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i)
    if (i == 14 || i == 15) ticks += std::stod(field);  // utime, stime
  return ticks / static_cast<double>(::sysconf(_SC_CLK_TCK));
}

drill::Match step_done(long step) {
  return body_is<actors::step_trained>([step](const actors::step_trained& s) { return s.step == step; });
}

// Milliseconds the job takes to answer the shell's `command`.
double order_ms(drill::EventFeed& feed, const std::string& command) {
  const auto start = Clock::now();
  const auto answer = feed.order(command);
  return answer ? std::chrono::duration<double, std::milli>(Clock::now() - start).count() : NAN;
}

// The undisturbed run's figures: all but the drills' and the control plane's share.
void measure_run(const drill::Drill& job, long steps, ScaleRow& row) {
  const double launched = drill::now();
  auto run = job.start("plain", false, true);
  if (!run) {
    row.problem = run.error().message;
    return;
  }
  drill::EventFeed& feed = *run->events;
  const auto started = feed.wait_for(body_is<actors::job_started>(), 600s);
  if (!started || !feed.wait_for(step_done(2), 600s)) {
    row.problem = "the job did not start and train 2 steps";
    return;
  }
  row.figures[column::joined] = started->unix_seconds - launched;
  const pid_t job_pid = run->process->pid();
  const double cpu_before = cpu_seconds(job_pid), wall_before = drill::now();
  row.figures[column::status] = order_ms(feed, "status");
  row.figures[column::workers] = order_ms(feed, "workers");
  double nodes_mib = 0;
  for (pid_t pid : run->process->descendants()) nodes_mib += resident_mib(pid);
  row.figures[column::job_memory] = resident_mib(job_pid);
  row.figures[column::rank_memory] = nodes_mib / row.ranks;
  if (feed.wait_for(step_done(steps), 600s))
    row.figures[column::job_cpu] = (cpu_seconds(job_pid) - cpu_before) / (drill::now() - wall_before);
  run->process->wait_exit(600s);
  std::vector<double> step_at(static_cast<std::size_t>(steps) + 1, NAN);
  std::vector<double> intervals;
  for (const job_event& event : feed.final_events(30s)) {
    if (const auto* step = caf::get_if<actors::step_trained>(&event.body);
        step && step->step >= 0 && step->step <= steps)
      step_at[static_cast<std::size_t>(step->step)] = event.unix_seconds;
    if (const auto* noted = caf::get_if<actors::checkpoint_noted>(&event.body);
        noted && noted->outcome == actors::CheckpointOutcome::committed && std::isnan(row.figures[column::commit]) &&
        noted->step >= 0 && noted->step <= steps)
      row.figures[column::commit] = event.unix_seconds - step_at[static_cast<std::size_t>(noted->step)];
  }
  for (long s = 3; s <= steps; ++s)
    if (!std::isnan(step_at[s]) && !std::isnan(step_at[s - 1])) intervals.push_back(step_at[s] - step_at[s - 1]);
  if (!intervals.empty()) row.figures[column::step] = median(intervals);
}

// One rank's ops of a step at sim.flops and sim.memory_bandwidth.
double modelled_compute_seconds(const ResolvedJob& job) {
  compute::SimBackend sim(job.config.sim);
  compute::GPT model(job.model, sim);
  compute::TrainerOptions options;
  options.batch_size = job.config.train.batch_size;
  options.seq_len = job.config.train.seq_len;
  options.lr = {1e-4, 1e-5, 0, 1};
  const std::vector<std::uint16_t> stream =
      bench_tokens(job.model, static_cast<std::size_t>(options.batch_size) * options.seq_len * 2 + 1);
  compute::Trainer trainer(model, options, stream, stream);
  trainer.step();
  return sim.modelled_seconds();
}

// The step as the sim models it, with nothing of the runtime's own: one rank's ops at sim.flops
// and sim.memory_bandwidth (a step of the model on the sim backend, here, on one rank), then the
// data-parallel ring's 2 (N − 1) messages of an N-th of the gradients one after another, each
// at the slowest link the ring crosses (between nodes when there are several). The modelled
// ring does not overlap the backward, so this is the most the modelled device would take.
// `compute` is modelled_compute_seconds(job), the same for every N.
double modelled_step_seconds(const ResolvedJob& job, double compute, int ranks, int nodes) {
  const compute::SimOptions& link = job.config.sim;
  const bool across = nodes > 1;
  const std::size_t gradient_bytes =
      static_cast<std::size_t>(compute::ParameterLayout(job.model).total()) * sizeof(float);
  // The sum the communicator runs: the ring's hops carry an N-th of the gradients, doubling's all.
  const comm::AllReduceAlgorithm algorithm = comm::all_reduce_algorithm(ranks, gradient_bytes);
  const double hop_bytes =
      static_cast<double>(gradient_bytes) / (algorithm == comm::AllReduceAlgorithm::ring ? ranks : 1);
  const double hop = (across ? link.link_latency_inter : link.link_latency_intra) +
                     hop_bytes / (across ? link.link_bandwidth_inter : link.link_bandwidth_intra);
  return compute + comm::all_reduce_hops(algorithm, ranks) * hop;
}

// The kill-node drill again with fault.recovery restart: seconds from the kill to the first step
// trained again once every node has restarted.
void measure_restart(DrillOptions options, const ResolvedJob& job, ScaleRow& row) {
  ResolvedJob restarting = job;
  restarting.config.fault.recovery = actors::RecoveryMode::restart;
  options.dir += "-restart";
  drill::Drill drill(options, restarting);
  if (Status prepared = drill.prepare(); !prepared) {
    row.problem = prepared.error().message;
    return;
  }
  const drill::Verdict v = drill::drill_running_job(drill);
  row.figures[column::restart] = v.recovered_after.value_or(NAN);
  if (!v.recovered_after) row.problem = "kill-node by restart: " + v.fault;
  std::error_code ignored;
  std::filesystem::remove_all(options.dir, ignored);
}

ScaleRow measure(const BenchScaleOptions& options, const ResolvedJob& job, double modelled_compute, int ranks) {
  ScaleRow row;
  row.ranks = ranks;
  row.figures.assign(figure_count, NAN);
  DrillOptions drill_options;
  drill_options.scenario = "kill-node";
  drill_options.at_step = 3;
  drill_options.slots = std::min(ranks / 2, options.slots);
  drill_options.workers = ranks / drill_options.slots;
  drill_options.dir = (std::filesystem::path(options.dir) / ("scale-" + std::to_string(ranks))).string();
  row.nodes = drill_options.workers;
  drill::Drill drill(drill_options, job);
  if (Status prepared = drill.prepare(); !prepared) {
    row.problem = prepared.error().message;
    return row;
  }
  measure_run(drill, options.steps, row);
  row.figures[column::plane] =
      100.0 * (1.0 - modelled_step_seconds(job, modelled_compute, ranks, row.nodes) / row.figures[column::step]);
  if (row.problem.empty()) {
    const drill::Verdict v = drill::drill_running_job(drill);
    row.figures[column::detect] = v.detected_after.value_or(NAN);
    row.figures[column::resume] = v.resumed_after.value_or(NAN);
    row.figures[column::recover] = v.recovered_after.value_or(NAN);
    if (!v.recovered_after) row.problem = "kill-node: " + v.fault;
  }
  std::error_code ignored;
  std::filesystem::remove_all(drill_options.dir, ignored);
  if (row.problem.empty()) measure_restart(drill_options, job, row);
  return row;
}

// (N, figure) of the rows that have the figure.
std::vector<std::pair<double, double>> points_of(const std::vector<ScaleRow>& rows, std::size_t figure) {
  std::vector<std::pair<double, double>> points;
  for (const ScaleRow& row : rows)
    if (row.figures[figure] > 0) points.emplace_back(row.ranks, row.figures[figure]);
  return points;
}

// The slope of log(figure) against log(N) over the rows that have the figure (NaN under two).
double log_log_slope(const std::vector<ScaleRow>& rows, std::size_t figure) {
  std::vector<std::pair<double, double>> points;
  for (const auto& [n, value] : points_of(rows, figure)) points.emplace_back(std::log(n), std::log(value));
  if (points.size() < 2) return NAN;
  double mx = 0, my = 0;
  for (const auto& [x, y] : points) mx += x, my += y;
  mx /= points.size(), my /= points.size();
  double sxy = 0, sxx = 0;
  for (const auto& [x, y] : points) sxy += (x - mx) * (y - my), sxx += (x - mx) * (x - mx);
  return sxx > 0 ? sxy / sxx : NAN;
}

void print_table(const std::vector<ScaleRow>& rows) {
  std::printf("| ranks | nodes |");
  for (const Figure& figure : figures) std::printf(" %s |", figure.name);
  std::printf("\n|---|---|");
  for (std::size_t i = 0; i < figure_count; ++i) std::printf("---|");
  std::printf("\n");
  for (const ScaleRow& row : rows) {
    std::printf("| %d | %d |", row.ranks, row.nodes);
    for (double figure : row.figures) std::printf(std::isnan(figure) ? " – |" : " %.3g |", figure);
    std::printf("\n");
  }
  std::printf("| slope | |");
  for (std::size_t i = 0; i < figure_count; ++i) {
    const double slope = log_log_slope(rows, i);
    std::printf(std::isnan(slope) ? " – |" : " %.2f |", slope);
  }
  std::printf("\n");
}

}  // namespace

int run_bench_scale(const BenchScaleOptions& options) {
  JobConfig config;
  config.model.preset = options.model;
  config.train.backend = compute::BackendKind::sim;
  config.train.steps = options.steps;
  config.train.batch_size = 1;
  config.train.threads = 1;
  config.train.val_every = 0;
  config.train.val_batches = 1;
  config.sample.tokens = 0;
  config.checkpoint.every = 2;
  config.fault.heartbeat_timeout = options.heartbeat_timeout;
  auto job = resolve(config);
  if (!job) return error_exit(ExitCode::bad_input, job.error().message);
  double compute = modelled_compute_seconds(*job);
  if (compute < options.step_compute) {
    // The roofline's two rates slowed alike: every op takes `slower` times as long, so the step's
    // modelled compute becomes step_compute without a second run of the model.
    const double slower = options.step_compute / compute;
    job->config.sim.flops /= slower;
    job->config.sim.memory_bandwidth /= slower;
    std::printf(
        "sim device slowed to %.3g FLOP/s and %.3g bytes/s a rank: %.2f s of modelled compute a step "
        "(--step-compute), so that the shell's round trips and the kill after step 3 land while the job "
        "trains\n",
        job->config.sim.flops, job->config.sim.memory_bandwidth, options.step_compute);
    compute = options.step_compute;
  }
  std::vector<ScaleRow> rows;
  for (int ranks : options.ranks) {
    std::printf("%d ranks ...\n", ranks);
    std::fflush(stdout);
    ScaleRow row = measure(options, *job, compute, ranks);
    if (!row.problem.empty()) std::printf("%d ranks: %s\n", ranks, row.problem.c_str());
    rows.push_back(std::move(row));
  }
  print_table(rows);
  int largest = 0;
  for (const ScaleRow& row : rows)
    if (row.problem.empty()) largest = std::max(largest, row.ranks);
  std::printf("largest N that ran here: %d\n", largest);
  if (options.svg_dir.empty()) return to_int(ExitCode::success);
  for (std::size_t i = 0; i < figure_count; ++i) {
    const auto path = std::filesystem::path(options.svg_dir) / ("scale-" + std::string(figures[i].file) + ".svg");
    std::ofstream out(path);
    out << log_log_svg(figures[i].name, points_of(rows, i), log_log_slope(rows, i));
    if (!out) return error_exit(ExitCode::failure, "--svg " + options.svg_dir + ": cannot write " + path.string());
  }
  std::printf("plots in %s/scale-*.svg\n", options.svg_dir.c_str());
  return to_int(ExitCode::success);
}

Command add_bench_scale_command(CLI::App& bench) {
  auto options = std::make_shared<BenchScaleOptions>();
  CLI::App* command = bench.add_subcommand(
      "scale",
      "Control-plane costs against the rank count: sim jobs (train.backend sim) joined, trained, checkpointed "
      "and drilled.");
  command->add_option("--ranks", options->ranks, "rank counts, comma-separated; each a multiple of --slots, or 2 nodes")
      ->delimiter(',')
      ->check(CLI::Range(2, 65536))
      ->default_str("8,16,32,64");
  command->add_option("--slots", options->slots, "ranks per node process")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  command->add_option("--model", options->model, "model preset")->capture_default_str();
  command->add_option("--steps", options->steps, "steps of each run (at least 4: the kill comes after step 3)")
      ->check(CLI::Range(4, 1000))
      ->capture_default_str();
  command
      ->add_option("--heartbeat-timeout", options->heartbeat_timeout,
                   "fault.heartbeat_timeout of every run, seconds (a node starting hundreds of ranks on few cores "
                   "may be silent longer than the default)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command
      ->add_option("--step-compute", options->step_compute,
                   "seconds of modelled compute a step takes at the least: a faster sim device is slowed to it, so "
                   "that the shell's round trips and the kill after step 3 land while the job trains; 0 = sim.flops "
                   "as it is")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  command->add_option("--svg", options->svg_dir, "write a log-log plot of each figure against N here (scale-*.svg)")
      ->check(CLI::ExistingDirectory);
  command->add_option("--dir", options->dir, "folder for the runs (a scale-N subfolder each, removed after)")
      ->check(CLI::ExistingDirectory)
      ->capture_default_str();
  return refusing_unknown(*command, [options] {
    for (int ranks : options->ranks) {
      const int slots = std::min(ranks / 2, options->slots);
      if (slots < 1 || ranks % slots != 0)
        return error_exit(ExitCode::bad_input, "--ranks " + std::to_string(ranks) + " is not a multiple of --slots " +
                                                   std::to_string(options->slots));
    }
    return run_bench_scale(*options);
  });
}

}  // namespace troupe::apps
