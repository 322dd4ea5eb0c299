// troupe bench pipeline: for GPipe, 1F1B, interleaved 1F1B (the smallest v >= 2 that splits
// the layers evenly), ZB-H1 and ZB-V (v = 2), p stages as p forked processes (1 thread each) train a few steps of
// `small`, every op traced; the measured bubble of each step is 1 − Σ forward and backward
// time / (p × the step's flush, from the first forward to the last backward over all stages).
// Beside it the simulator's prediction from what the same run measured (each step from its own
// ops' costs where they stand in its stream; and, to show what that adds, each stage's mean costs)
// and the closed form. The schedules run in rounds, each once a round, and each is set against
// 1F1B's run of the same round. More stages than cores (p 4 on 2 cores) is said as oversubscribed
// before the table. With --stage-speeds: bench_pipeline_split.cpp.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/pipeline_steps.hpp"
#include "apps/exit_codes.hpp"
#include "schedules/generate.hpp"
#include "schedules/simulator.hpp"

namespace troupe::apps {
namespace {

double measured_bubble(const schedules::Schedule& schedule, const StepTimes& step) {
  double busy = 0;
  for (std::size_t s = 0; s < step.size(); ++s)
    for (std::size_t i = 0; i < step[s].size(); ++i)
      if (schedules::is_compute(schedule.streams[s][i].op)) busy += step[s][i].end - step[s][i].start;
  return 1.0 - busy / (schedule.stages * flush_seconds(schedule, step));
}

// Why costs differ by position: how much longer a forward or backward takes while another stage
// computes than alone, on stages that share the machine's cores. Per stage and op kind, the
// median duration of ops that overlapped another stage's computing for more than 90 % of their
// time over that of ops that overlapped it for less than 10 %; the median over the stage and kind
// pairs that have both. 0 when none has.
double shared_over_alone(const schedules::Schedule& schedule, const std::vector<StepTimes>& steps) {
  std::map<std::pair<std::size_t, schedules::Op>, std::vector<double>> alone, shared;
  for (const StepTimes& step : steps) {
    for (std::size_t s = 0; s < step.size(); ++s) {
      for (std::size_t i = 0; i < step[s].size(); ++i) {
        const schedules::Op op = schedule.streams[s][i].op;
        if (!schedules::is_compute(op)) continue;
        const schedules::OpTiming& t = step[s][i];
        double overlap = 0;
        for (std::size_t other = 0; other < step.size(); ++other) {
          if (other == s) continue;
          for (std::size_t j = 0; j < step[other].size(); ++j)
            if (schedules::is_compute(schedule.streams[other][j].op))
              overlap += std::max(0.0, std::min(t.end, step[other][j].end) - std::max(t.start, step[other][j].start));
        }
        const double share = overlap / (t.end - t.start);
        if (share < 0.1) alone[{s, op}].push_back(t.end - t.start);
        if (share > 0.9) shared[{s, op}].push_back(t.end - t.start);
      }
    }
  }
  std::vector<double> ratios;
  for (const auto& [key, seconds] : alone)
    if (shared.count(key) > 0) ratios.push_back(median(shared.at(key)) / median(seconds));
  return ratios.empty() ? 0.0 : median(ratios);
}

// One step's costs op by op: every forward and backward at its place in its stream, what it took
// there in that step.
schedules::CostModel costs_where_they_stand(const schedules::Schedule& schedule, const StepTimes& step) {
  schedules::CostModel costs;
  for (std::size_t s = 0; s < schedule.streams.size(); ++s) {
    std::vector<double>& row = costs.op_costs.emplace_back(schedule.streams[s].size(), 0.0);
    for (std::size_t i = 0; i < row.size(); ++i)
      if (schedules::is_compute(schedule.streams[s][i].op)) row[i] = step[s][i].end - step[s][i].start;
  }
  return costs;
}

// Every forward's, B's, W's or backward's seconds over the measured steps, by stage and op.
using OpSeconds = std::map<std::pair<std::size_t, schedules::Op>, std::vector<double>>;

OpSeconds seconds_by_stage_and_op(const schedules::Schedule& schedule, const std::vector<StepTimes>& steps) {
  OpSeconds seconds;
  for (const StepTimes& step : steps)
    for (std::size_t s = 0; s < step.size(); ++s)
      for (std::size_t i = 0; i < step[s].size(); ++i)
        if (schedules::is_compute(schedule.streams[s][i].op))
          seconds[{s, schedule.streams[s][i].op}].push_back(step[s][i].end - step[s][i].start);
  return seconds;
}

double mean_of(const std::vector<double>& values) {
  return values.empty() ? 0.0 : std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
}

// Costs per stage: every forward of a stage costs the mean of its forwards over the measured
// steps, every backward the mean of its backwards, wherever they stand.
schedules::CostModel costs_per_stage(const schedules::Schedule& schedule, const std::vector<StepTimes>& steps) {
  const OpSeconds seconds = seconds_by_stage_and_op(schedule, steps);
  schedules::CostModel costs;
  for (std::size_t s = 0; s < schedule.streams.size(); ++s) {
    const std::vector<schedules::Instruction>& stream = schedule.streams[s];
    std::vector<double>& row = costs.op_costs.emplace_back(stream.size(), 0.0);
    for (std::size_t i = 0; i < stream.size(); ++i)
      if (schedules::is_compute(stream[i].op)) row[i] = mean_of(seconds.at({s, stream[i].op}));
  }
  return costs;
}

// One round's figures of one schedule: medians over its measured steps.
struct BubbleFigures {
  double measured = 0, simulated_per_op = 0, simulated_per_stage = 0, transfer = 0, dispatch = 0, shared_over_alone = 0;
  double flush = 0;  // seconds, the median step's first forward to its last backward
  // Mean seconds of one micro-batch's forward, B and W on one chunk over every stage and step; B
  // and W 0 where the backward is not split.
  double forward = 0, backward_input = 0, backward_weights = 0;
  // How much one op's cost varies: the standard deviation of the log of its seconds about the
  // mean log of its kind on its stage, over every stage, kind and step (what `troupe schedule
  // --cost-spread` takes).
  double spread = 0;
};

void mean_op_costs(const schedules::Schedule& schedule, const std::vector<StepTimes>& steps, BubbleFigures& figures) {
  std::map<schedules::Op, std::vector<double>> seconds;
  for (const auto& [key, values] : seconds_by_stage_and_op(schedule, steps))
    seconds[key.second].insert(seconds[key.second].end(), values.begin(), values.end());
  figures.forward = mean_of(seconds[schedules::Op::forward]);
  figures.backward_input = mean_of(seconds[schedules::Op::backward_input]);
  figures.backward_weights = mean_of(seconds[schedules::Op::backward_weights]);
}

double op_spread(const schedules::Schedule& schedule, const std::vector<StepTimes>& steps) {
  double squares = 0;
  std::size_t count = 0;
  for (auto& [key, values] : seconds_by_stage_and_op(schedule, steps)) {
    for (double& v : values) v = std::log(v);
    const double mean = mean_of(values);
    for (double v : values) squares += (v - mean) * (v - mean);
    count += values.size();
  }
  return count > 0 ? std::sqrt(squares / static_cast<double>(count)) : 0.0;
}

Expected<BubbleFigures> measure(schedules::ScheduleKind kind, int chunks, const BenchPipelineOptions& o) {
  auto schedule = schedules::generate_schedule(kind, o.stages, o.microbatches, chunks);
  if (!schedule) return schedule.error();
  auto measured = run_steps(*schedule, o, {});
  if (!measured) return measured.error();
  const std::vector<StepTimes>& steps = *measured;
  std::vector<double> bubbles, flushes;
  for (const StepTimes& step : steps) {
    bubbles.push_back(measured_bubble(*schedule, step));
    flushes.push_back(flush_seconds(*schedule, step));
  }
  BubbleFigures figures;
  figures.measured = median(bubbles);
  figures.flush = median(flushes);
  figures.transfer = median_transfer(*schedule, steps);
  figures.dispatch = median_dispatch(*schedule, steps);
  figures.shared_over_alone = shared_over_alone(*schedule, steps);
  mean_op_costs(*schedule, steps, figures);
  figures.spread = op_spread(*schedule, steps);
  auto simulated_bubble = [&](schedules::CostModel costs) -> Expected<double> {
    costs.latency = figures.transfer;
    costs.dispatch = figures.dispatch;
    // The bench's stages have no tensor shards, ZeRO-3 or experts: where the schedule's Ws fill
    // waits, PipelineTrainer's do, and the simulation's too.
    costs.fill_waits_with_weights = schedules::fills_waits_with_weights(kind);
    auto simulation = schedules::simulate(*schedule, costs);
    if (!simulation) return simulation.error();
    return simulation->bubble;
  };
  // Per op: each step simulated on its own ops' costs, the median over the steps. A step's ops
  // vary from one step to the next, and where a schedule leaves a stage no slack, a slow op in one
  // step idles its neighbour in that step; the simulation of one step on the median costs would
  // not see it.
  std::vector<double> per_step;
  for (const StepTimes& step : steps) {
    auto bubble = simulated_bubble(costs_where_they_stand(*schedule, step));
    if (!bubble) return bubble.error();
    per_step.push_back(*bubble);
  }
  figures.simulated_per_op = median(per_step);
  auto per_stage = simulated_bubble(costs_per_stage(*schedule, steps));
  if (!per_stage) return per_stage.error();
  figures.simulated_per_stage = *per_stage;
  return figures;
}

// 1F1B's and GPipe's (p-1)/(m+p-1) and interleaving's (p-1)/(vm+p-1), whatever the costs. ZB-H1's
// at the costs measured: each stage idles (p-1)(F+B-W) against m(F+B+W) of work (Qi et al.; it
// is (p-1)/(3m+p-1) where F = B = W). ZB-V has none (NaN).
double closed_form(schedules::ScheduleKind kind, int chunks, const BenchPipelineOptions& o, double F, double B,
                   double W) {
  const double p = o.stages, m = o.microbatches, vm = static_cast<double>(chunks) * o.microbatches;
  if (kind == schedules::ScheduleKind::zb_v) return std::nan("");
  if (kind != schedules::ScheduleKind::zb_h1) return (p - 1) / (vm + p - 1);
  const double idle = (p - 1) * (F + B - W);
  return idle / (m * (F + B + W) + idle);
}

// A schedule's turns: its figures in every round it ran, or why it did not.
struct ScheduleTurns {
  schedules::ScheduleKind kind;
  int chunks = 1;
  std::string name;
  std::vector<BubbleFigures> rounds;
  std::string error;
};

template <typename Read>
double median_over(const std::vector<BubbleFigures>& rounds, Read read) {
  std::vector<double> values;
  for (const BubbleFigures& f : rounds) values.push_back(read(f));
  return median(values);
}

// The median over the rounds of `read` of `turns` against `read` of `reference` in the same round;
// NaN where either missed a round.
template <typename Read>
double median_ratio(const ScheduleTurns& turns, const ScheduleTurns& reference, int rounds, Read read) {
  if (static_cast<int>(turns.rounds.size()) != rounds || static_cast<int>(reference.rounds.size()) != rounds)
    return std::nan("");
  std::vector<double> ratios;
  for (int r = 0; r < rounds; ++r) ratios.push_back(read(turns.rounds[r]) / read(reference.rounds[r]));
  return median(ratios);
}

}  // namespace

int run_bench_pipeline(const BenchPipelineOptions& o) {
  if (!o.stage_speeds.empty()) return run_bench_pipeline_split(o);
  const compute::GPTConfig cfg = bench_model(o);
  std::printf(
      "bench pipeline: %s (%d layers), p=%d stages (1 process x 1 thread each), m=%d micro-batches of %d x seq %d, "
      "%d rounds of every schedule in turn, each the median of %d steps\n",
      o.model.c_str(), cfg.n_layer, o.stages, o.microbatches, o.batch, cfg.block_size, o.rounds, o.steps);
  // More stages than cores: the stages take turns on them, so every figure includes that sharing.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.stages > cores)
    std::printf("oversubscribed: %d stages on %d cores, %.3g processes per core\n", o.stages, cores,
                static_cast<double>(o.stages) / cores);
  // Interleaving needs equal chunks: the smallest v >= 2 that splits the layers evenly (small's 6
  // layers on 2 stages: v = 3).
  int chunks = o.virtual_stages > 0 ? o.virtual_stages : 2;
  while (o.virtual_stages == 0 && chunks * o.stages <= cfg.n_layer && cfg.n_layer % (chunks * o.stages) != 0) ++chunks;
  // ZB-V needs 2p equal chunks (small on 2 stages: give --layers 4 or 8); where the layers do not
  // cut so, its line says why.
  std::vector<ScheduleTurns> schedules = {{schedules::ScheduleKind::gpipe, 1},
                                          {schedules::ScheduleKind::one_f_one_b, 1},
                                          {schedules::ScheduleKind::interleaved, chunks},
                                          {schedules::ScheduleKind::zb_h1, 1},
                                          {schedules::ScheduleKind::zb_v, 2}};
  for (ScheduleTurns& s : schedules) {
    s.name = schedules::to_string(s.kind);
    if (s.chunks > 1) s.name += " v=" + std::to_string(s.chunks);
  }
  // Tokens per second over the forward/backward part of a step (no gradient sums, no update).
  const double tokens_per_step = static_cast<double>(o.microbatches) * o.batch * cfg.block_size;
  auto tokens_per_s = [&](const BubbleFigures& f) { return tokens_per_step / f.flush; };
  // A shared machine drifts over minutes by as much as the schedules differ: every schedule runs
  // once a round, and each is compared with 1F1B's run of the same round.
  for (int round = 1; round <= o.rounds; ++round) {
    std::printf("round %d/%d: bubble, tokens/s:", round, o.rounds);
    std::fflush(stdout);
    for (ScheduleTurns& s : schedules) {
      if (!s.error.empty()) continue;
      auto figures = measure(s.kind, s.chunks, o);
      if (!figures) {
        s.error = figures.error().message;
        std::printf(" %s failed;", s.name.c_str());
      } else {
        s.rounds.push_back(*figures);
        std::printf(" %s %.4f %.0f;", s.name.c_str(), figures->measured, tokens_per_s(*figures));
      }
      std::fflush(stdout);
    }
    std::printf("\n");
  }
  std::printf(
      "(bubble = 1 - forward and backward time / (p x flush, first forward to last backward), per step;\n"
      " /1f1b = against 1F1B's in the same round; every column the median over the rounds;\n"
      " the simulator runs the same streams with the latency measured for messages (transfer), the\n"
      " runtime's time between two computes where the second has no input to wait for (dispatch) and costs\n"
      " measured in the same run: per op = each step from its own forwards' and backwards' costs where\n"
      " they stand in its stream, the median over the steps; per stage = the stage's mean forward and\n"
      " mean backward everywhere; closed form: ZB-H1's at the forward, B and W measured;\n"
      " shared/alone = how much longer an op takes while another stage computes than alone; op spread =\n"
      " the standard deviation of the log of an op's seconds about its kind's on its stage)\n");
  std::printf("%-16s %9s %7s %9s %10s %12s %12s %12s %13s %10s %9s %10s %7s\n", "schedule", "measured", "/1f1b",
              "sim op", "sim stage", "closed form", "transfer ms", "dispatch ms", "shared/alone", "op spread",
              "meas/sim", "tokens/s", "/1f1b");
  const ScheduleTurns& one_f_one_b = schedules[1];
  for (const ScheduleTurns& s : schedules) {
    if (!s.error.empty()) {
      std::printf("%-16s %s\n", s.name.c_str(), s.error.c_str());
      continue;
    }
    auto mid = [&](auto read) { return median_over(s.rounds, read); };
    const double F = mid([](const BubbleFigures& f) { return f.forward; });
    const double B = mid([](const BubbleFigures& f) { return f.backward_input; });
    const double W = mid([](const BubbleFigures& f) { return f.backward_weights; });
    std::printf("%-16s %9.3f %7.2f %9.3f %10.3f %12.3f %12.2f %12.3f %13.2f %10.3f %9.3f %10.0f %7.2f\n",
                s.name.c_str(), mid([](const BubbleFigures& f) { return f.measured; }),
                median_ratio(s, one_f_one_b, o.rounds, [](const BubbleFigures& f) { return f.measured; }),
                mid([](const BubbleFigures& f) { return f.simulated_per_op; }),
                mid([](const BubbleFigures& f) { return f.simulated_per_stage; }),
                closed_form(s.kind, s.chunks, o, F, B, W), mid([](const BubbleFigures& f) { return f.transfer * 1e3; }),
                mid([](const BubbleFigures& f) { return f.dispatch * 1e3; }),
                mid([](const BubbleFigures& f) { return f.shared_over_alone; }),
                mid([](const BubbleFigures& f) { return f.spread; }),
                mid([](const BubbleFigures& f) { return f.measured / f.simulated_per_op; }), mid(tokens_per_s),
                median_ratio(s, one_f_one_b, o.rounds, tokens_per_s));
    if (s.kind == schedules::ScheduleKind::zb_h1)
      std::printf(
          "zb-h1 at its costs (F %.2f, B %.2f, W %.2f ms a micro-batch, medians over the rounds): its closed form "
          "is %.2fx 1F1B's\n",
          F * 1e3, B * 1e3, W * 1e3, closed_form(s.kind, 1, o, F, B, W) / closed_form(one_f_one_b.kind, 1, o, F, B, W));
  }
  return to_int(ExitCode::success);
}

Command add_bench_pipeline_command(CLI::App& bench) {
  auto options = std::make_shared<BenchPipelineOptions>();
  CLI::App* command = bench.add_subcommand(
      "pipeline", "Measured pipeline bubble per schedule beside the simulator's prediction and the closed form.");
  add_model_option(*command, options->model);
  command->add_option("--layers", options->layers, "transformer blocks; 0 = the preset's")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  command
      ->add_option("--virtual-stages", options->virtual_stages,
                   "interleaved chunks per stage; 0 = the smallest v >= 2 that splits the layers evenly")
      ->check(CLI::Range(0, 64))
      ->capture_default_str();
  command->add_option("--stages", options->stages, "pipeline stages p (one process each)")
      ->check(CLI::Range(2, 16))
      ->capture_default_str();
  command->add_option("--microbatches", options->microbatches, "micro-batches per step m")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  command->add_option("--batch", options->batch, "sequences per micro-batch")
      ->check(CLI::Range(1, 4096))
      ->capture_default_str();
  command->add_option("--steps", options->steps, "measured steps")->check(CLI::Range(1, 1000))->capture_default_str();
  CLI::Option* rounds =
      command
          ->add_option("--rounds", options->rounds,
                       "rounds of every schedule in turn: each figure the median over them, each ratio to 1F1B taken "
                       "within a round")
          ->check(CLI::Range(1, 100))
          ->capture_default_str();
  command
      ->add_option("--stage-speeds", options->stage_speeds,
                   "relative speed of each stage (1,0.5): 1f1b split balanced and by speed, each slower stage held to "
                   "its share of a core by a CPU quota")
      ->type_name("LIST")
      ->excludes(rounds);
  command->add_option("--warmup", options->warmup, "unmeasured steps first")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  return refusing_unknown(*command, [options] { return run_bench_pipeline(*options); });
}

}  // namespace troupe::apps
