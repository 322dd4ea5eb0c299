// troupe bench pipeline: for GPipe, 1F1B, interleaved 1F1B (the smallest v >= 2 that splits
// the layers evenly), ZB-H1 and ZB-V (v = 2), p stages as p forked processes (1 thread each) train a few steps of
// `small`, every op traced; the measured bubble of each step is 1 − Σ forward and backward
// time / (p × the step's flush, from the first forward to the last backward over all stages).
// Beside it the simulator's prediction from what the same run measured (each step from its own
// ops' costs where they stand in its stream; and, to show what that adds, each stage's mean costs)
// and the closed form.
// More stages than cores (p 4 on 2 cores) is said as oversubscribed before the table.
//
// With --stage-speeds (1,0.5): mixed hardware. Each stage slower than the fastest is held to its
// speed's share of a core by a CPU quota (cpu_quota.hpp), and 1F1B runs in turns split balanced (by
// parameters) and by speed (compute::split_layers_by_speed). Each split's tokens/s is set beside
// the simulator's: the fastest stage's forward and backward seconds per unit of model FLOPs,
// measured in the balanced run, priced over every stage's blocks (stage_compute_per_token) at its
// declared speed, with the messages' latency measured in the balanced run.

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

#include <spdlog/fmt/fmt.h>

#include "actors/worker/pipeline_trainer.hpp"
#include "apps/bench/bench_arguments.hpp"
#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/bench_stage.hpp"
#include "apps/bench/cpu_quota.hpp"
#include "apps/config/speeds.hpp"
#include "apps/exit_codes.hpp"
#include "comm/bootstrap.hpp"
#include "compute/random.hpp"
#include "schedules/checker.hpp"
#include "schedules/generate.hpp"
#include "schedules/simulator.hpp"

namespace troupe::apps {
namespace {

// When each instruction of a stage's stream ran, per measured step: steps[step][i] for
// streams[stage][i]. Forwards and backwards span their compute; a send starts and ends when it
// was posted. Recvs, reduce_grads and optimizer_step are not read.
using StageSteps = std::vector<std::vector<schedules::OpTiming>>;

std::vector<std::uint8_t> pack(const StageSteps& steps) {
  std::vector<double> values;
  for (const auto& step : steps)
    for (const schedules::OpTiming& t : step) values.insert(values.end(), {t.start, t.end});
  std::vector<std::uint8_t> bytes(values.size() * sizeof(double));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

StageSteps unpack(const std::vector<std::uint8_t>& bytes, int steps, std::size_t instructions) {
  std::vector<double> values(bytes.size() / sizeof(double));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(double));
  TROUPE_CHECK(values.size() == static_cast<std::size_t>(steps) * instructions * 2,
               "a stage's report has the wrong size");
  StageSteps result(static_cast<std::size_t>(steps), std::vector<schedules::OpTiming>(instructions));
  std::size_t next = 0;
  for (auto& step : result)
    for (schedules::OpTiming& t : step) {
      t.start = values[next++];
      t.end = values[next++];
    }
  return result;
}

// The preset, with --layers blocks when given.
compute::GPTConfig bench_model(const BenchPipelineOptions& o) {
  compute::GPTConfig cfg = *compute::gpt_preset(o.model);
  if (o.layers > 0) cfg.n_layer = o.layers;
  return cfg;
}

// How a run places its layers and holds its stages: `split` (empty: balanced for the schedule),
// and per stage the quota it joins (null: none, a whole core).
struct StagePlacement {
  std::vector<compute::StageLayers> split;
  std::vector<const CpuQuota*> quotas;
};

Expected<std::vector<std::uint8_t>> stage_body(comm::Engine& engine, const BenchPipelineOptions& o,
                                               const schedules::Schedule& schedule, const schedules::CheckReport& check,
                                               const StagePlacement& placement) {
  const int rank = engine.rank();
  if (!placement.quotas.empty())
    if (const CpuQuota* quota = placement.quotas[static_cast<std::size_t>(rank)])
      if (Status joined = quota->join(::getpid()); !joined) return joined.error();
  auto backend = compute::make_backend(compute::BackendKind::cpu, compute::Precision::fp32, 1);
  if (!backend) return backend.error();
  auto stage = BenchStage::create(
      engine, **backend, {bench_model(o), o.stages, o.microbatches, o.batch, o.warmup + o.steps, placement.split},
      schedule, check);
  if (!stage) return stage.error();
  actors::PipelineTrainer& trainer = (*stage)->trainer();
  monitor::TraceRecorder trace;
  trainer.record_into(trace);
  for (int i = 0; i < o.warmup + o.steps; ++i) trainer.step();
  const std::vector<schedules::Instruction>& own = schedule.streams[static_cast<std::size_t>(rank)];
  std::map<std::tuple<schedules::Op, int, int>, std::size_t> index_of;  // (op, micro-batch, chunk) → place
  for (std::size_t i = 0; i < own.size(); ++i) index_of[{own[i].op, own[i].microbatch, own[i].chunk}] = i;
  StageSteps steps(static_cast<std::size_t>(o.steps), std::vector<schedules::OpTiming>(own.size()));
  for (const monitor::TraceEvent& e : trace.events()) {
    // Computes are traced under their op's name (a split backward's B and W apart), sends by name.
    schedules::Op op = schedules::Op::reduce_grads;
    for (schedules::Op compute : {schedules::Op::forward, schedules::Op::backward, schedules::Op::backward_input,
                                  schedules::Op::backward_weights})
      if (e.category == schedules::to_string(compute)) op = compute;
    if (e.name == "send_act") op = schedules::Op::send_act;
    if (e.name == "send_grad") op = schedules::Op::send_grad;
    if (op == schedules::Op::reduce_grads) continue;
    // args: step, micro-batch, chunk
    const int step = std::stoi(e.args[0].second) - o.warmup;
    if (step < 0) continue;
    const std::size_t i = index_of.at({op, std::stoi(e.args[1].second), std::stoi(e.args[2].second)});
    const double start = e.start_us * 1e-6;
    steps[static_cast<std::size_t>(step)][i] = schedules::is_send(op)
                                                   ? schedules::OpTiming{start, start}
                                                   : schedules::OpTiming{start, start + e.duration_us * 1e-6};
  }
  return pack(steps);
}

// One measured step of every stage: step[stage][instruction].
using StepTimes = std::vector<std::vector<schedules::OpTiming>>;

// The simulator's definition on measured times: 1 − Σ forward and backward seconds / (p × flush),
// flush from the step's first forward to its last backward, B or W (the simulator starts every
// stage at 0, which is where the first forward starts).
double flush_seconds(const schedules::Schedule& schedule, const StepTimes& step) {
  double first = 1e300, last = 0;
  for (std::size_t s = 0; s < step.size(); ++s) {
    for (std::size_t i = 0; i < step[s].size(); ++i) {
      const schedules::Op op = schedule.streams[s][i].op;
      if (!schedules::is_compute(op)) continue;
      first = std::min(first, step[s][i].start);
      if (op != schedules::Op::forward) last = std::max(last, step[s][i].end);
    }
  }
  return last - first;
}

double measured_bubble(const schedules::Schedule& schedule, const StepTimes& step) {
  double busy = 0;
  for (std::size_t s = 0; s < step.size(); ++s)
    for (std::size_t i = 0; i < step[s].size(); ++i)
      if (schedules::is_compute(schedule.streams[s][i].op)) busy += step[s][i].end - step[s][i].start;
  return 1.0 - busy / (schedule.stages * flush_seconds(schedule, step));
}

// How long a message takes from its send being posted to its consumer starting, where the
// consumer stood idle waiting for it (its previous compute had ended before the send was posted):
// the engine's transfer, the completion through the mailbox and the wake-up, which the simulator
// calls latency. Where the consumer was still busy the message's time is hidden, so not counted.
std::vector<double> transfer_times(const schedules::Schedule& schedule, const StepTimes& step) {
  std::map<schedules::Transfer, double> posted;
  for (std::size_t s = 0; s < step.size(); ++s)
    for (std::size_t i = 0; i < step[s].size(); ++i)
      if (schedules::is_send(schedule.streams[s][i].op))
        posted[*schedules::transfer_of(schedule, static_cast<int>(s), schedule.streams[s][i])] = step[s][i].start;
  std::vector<double> times;
  for (std::size_t s = 0; s < step.size(); ++s) {
    // In the order the stage ran its computes: a W that filled a wait ran before its place.
    std::vector<std::size_t> computes;
    for (std::size_t i = 0; i < step[s].size(); ++i)
      if (schedules::is_compute(schedule.streams[s][i].op)) computes.push_back(i);
    std::sort(computes.begin(), computes.end(),
              [&](std::size_t a, std::size_t b) { return step[s][a].start < step[s][b].start; });
    double previous_end = -1e300;
    for (std::size_t i : computes) {
      const schedules::Instruction& ins = schedule.streams[s][i];
      const schedules::Op input = ins.op == schedules::Op::forward ? schedules::Op::recv_act : schedules::Op::recv_grad;
      // W has no input: it reads what its B kept.
      const auto transfer =
          ins.op == schedules::Op::backward_weights
              ? std::nullopt
              : schedules::transfer_of(schedule, static_cast<int>(s), {input, ins.microbatch, ins.chunk, -1});
      if (transfer && previous_end < posted.at(*transfer)) times.push_back(step[s][i].start - posted.at(*transfer));
      previous_end = step[s][i].end;
    }
  }
  return times;
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

// Costs per stage: every forward of a stage costs the mean of its forwards over the measured
// steps, every backward the mean of its backwards, wherever they stand.
schedules::CostModel costs_per_stage(const schedules::Schedule& schedule, const std::vector<StepTimes>& steps) {
  schedules::CostModel costs;
  for (std::size_t s = 0; s < schedule.streams.size(); ++s) {
    const std::vector<schedules::Instruction>& stream = schedule.streams[s];
    std::map<schedules::Op, std::vector<double>> seconds;  // forward, backward
    for (const StepTimes& step : steps)
      for (std::size_t i = 0; i < stream.size(); ++i)
        if (schedules::is_compute(stream[i].op)) seconds[stream[i].op].push_back(step[s][i].end - step[s][i].start);
    std::map<schedules::Op, double> mean;
    for (const auto& [op, values] : seconds)
      mean[op] = std::accumulate(values.begin(), values.end(), 0.0) / static_cast<double>(values.size());
    std::vector<double>& row = costs.op_costs.emplace_back(stream.size(), 0.0);
    for (std::size_t i = 0; i < stream.size(); ++i)
      if (schedules::is_compute(stream[i].op)) row[i] = mean.at(stream[i].op);
  }
  return costs;
}

struct BubbleFigures {
  double measured = 0, simulated_per_op = 0, simulated_per_stage = 0, closed_form = 0, transfer = 0,
         shared_over_alone = 0;
  double flush = 0;  // seconds, the median step's first forward to its last backward
};

// Every measured step of `schedule` run by p forked stages.
Expected<std::vector<StepTimes>> run_steps(const schedules::Schedule& schedule, const BenchPipelineOptions& o,
                                           const StagePlacement& placement) {
  auto check = schedules::check_schedule(schedule);
  if (!check) return check.error();
  auto results = comm::run_local_ranks(
      o.stages, [&](comm::Engine& engine) { return stage_body(engine, o, schedule, *check, placement); },
      std::chrono::minutes(20));
  if (!results) return results.error();
  std::vector<StepTimes> steps(static_cast<std::size_t>(o.steps));
  for (std::size_t r = 0; r < results->size(); ++r) {
    const auto& result = (*results)[r];
    if (!result.ok) return Error{"stage " + std::to_string(r) + ": " + result.error};
    const StageSteps stage = unpack(result.report, o.steps, schedule.streams[r].size());
    for (std::size_t step = 0; step < steps.size(); ++step) steps[step].push_back(stage[step]);
  }
  return steps;
}

// The median over the steps of the messages' latency (transfer_times), 0 where none waited.
double median_transfer(const schedules::Schedule& schedule, const std::vector<StepTimes>& steps) {
  std::vector<double> transfers;
  for (const StepTimes& step : steps)
    for (double t : transfer_times(schedule, step)) transfers.push_back(t);
  return transfers.empty() ? 0.0 : median(transfers);
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
  figures.shared_over_alone = shared_over_alone(*schedule, steps);
  auto simulated_bubble = [&](schedules::CostModel costs) -> Expected<double> {
    costs.latency = figures.transfer;
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
  // 1F1B's and GPipe's (p-1)/(m+p-1), interleaving's (p-1)/(vm+p-1), ZB-H1's (p-1)/(3m+p-1) with
  // F = B = W; ZB-V has none (NaN).
  const double p = o.stages, m = o.microbatches, vm = static_cast<double>(chunks) * o.microbatches;
  figures.closed_form = kind == schedules::ScheduleKind::zb_h1  ? (p - 1) / (3 * m + p - 1)
                        : kind == schedules::ScheduleKind::zb_v ? std::nan("")
                                                                : (p - 1) / (vm + p - 1);
  return figures;
}

// Seconds a forward and a backward of one micro-batch take on `stage` per unit of its blocks'
// stage_compute_per_token, the means over the measured steps.
struct StageRate {
  double forward = 0, backward = 0;
};

StageRate stage_rate(const schedules::Schedule& schedule, const std::vector<StepTimes>& steps, std::size_t stage,
                     double work) {
  std::vector<double> forwards, backwards;
  for (const StepTimes& step : steps)
    for (std::size_t i = 0; i < step[stage].size(); ++i) {
      const schedules::Op op = schedule.streams[stage][i].op;
      if (schedules::is_compute(op))
        (op == schedules::Op::forward ? forwards : backwards).push_back(step[stage][i].end - step[stage][i].start);
    }
  auto mean = [](const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0) / v.size(); };
  return {mean(forwards) / work, mean(backwards) / work};
}

double stage_work(const compute::GPTConfig& cfg, const compute::StageLayers& l) {
  return compute::stage_compute_per_token(cfg, cfg.block_size, l.first_layer, l.last_layer);
}

// The simulator's flush for `split` at `speeds`: every stage's blocks priced at `rate`, over its speed.
Expected<double> predicted_flush(const schedules::Schedule& schedule, const compute::GPTConfig& cfg,
                                 const std::vector<compute::StageLayers>& split, const std::vector<double>& speeds,
                                 StageRate rate, double latency) {
  schedules::CostModel costs;
  costs.forward = rate.forward;
  costs.backward = rate.backward;
  costs.latency = latency;
  costs.speeds = speeds;
  for (const compute::StageLayers& l : split) costs.forward_scale.push_back(stage_work(cfg, l));
  costs.backward_scale = costs.forward_scale;
  auto simulation = schedules::simulate(schedule, costs);
  if (!simulation) return simulation.error();
  return simulation->flush;
}

std::string blocks_of(const std::vector<compute::StageLayers>& split) {
  std::string text;
  for (const compute::StageLayers& l : split)
    text += (text.empty() ? "" : " | ") + std::to_string(l.first_layer) + "-" + std::to_string(l.last_layer - 1);
  return text;
}

int run_bench_split(const BenchPipelineOptions& o) {
  auto declared = parse_speeds("--stage-speeds", o.stage_speeds);
  if (!declared) return error_exit(ExitCode::bad_input, declared.error().message);
  if (static_cast<int>(declared->size()) != o.stages)
    return error_exit(ExitCode::bad_input, "--stage-speeds " + o.stage_speeds + ": " +
                                               std::to_string(declared->size()) + " speeds for --stages " +
                                               std::to_string(o.stages) + " (one a stage)");
  if (std::any_of(declared->begin(), declared->end(), [](double v) { return !(v > 0 && std::isfinite(v)); }))
    return error_exit(ExitCode::bad_input, "--stage-speeds " + o.stage_speeds + ": every speed must be positive");
  const double fastest = *std::max_element(declared->begin(), declared->end());
  const std::size_t fastest_stage =
      static_cast<std::size_t>(std::max_element(declared->begin(), declared->end()) - declared->begin());
  std::vector<double> shares;  // of a core: the fastest stage has one
  for (double speed : *declared) shares.push_back(speed / fastest);
  const compute::GPTConfig cfg = bench_model(o);
  auto by_speed = compute::split_layers_by_speed(cfg, cfg.block_size, *declared);
  if (!by_speed) return error_exit(ExitCode::bad_input, by_speed.error().message);
  auto balanced = compute::split_layers(cfg, o.stages);
  if (!balanced) return error_exit(ExitCode::bad_input, balanced.error().message);

  std::printf(
      "bench pipeline --stage-speeds %s: %s (%d layers), 1f1b, p=%d stages (1 process x 1 thread each), m=%d "
      "micro-batches of %d x seq %d, median of %d steps; load average %.2f on %u cores at the start\n",
      o.stage_speeds.c_str(), o.model.c_str(), cfg.n_layer, o.stages, o.microbatches, o.batch, cfg.block_size, o.steps,
      load_average(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::optional<CpuQuota>> held(shares.size());
  StagePlacement placement;
  for (std::size_t s = 0; s < shares.size(); ++s) {
    placement.quotas.push_back(nullptr);
    if (shares[s] >= 1) continue;
    auto quota = CpuQuota::create("bench-stage" + std::to_string(s), shares[s]);
    if (!quota) {
      std::printf("stage %zu not held to %.0f %% of a core, it runs on a whole one: %s\n", s, 100 * shares[s],
                  quota.error().message.c_str());
      continue;
    }
    held[s].emplace(std::move(*quota));
    placement.quotas.back() = &*held[s];
    std::printf("stage %zu held to %.0f %% of a core: %s\n", s, 100 * shares[s], held[s]->describe().c_str());
  }
  std::printf(
      "(tokens/s over the forward/backward part of a step, first forward to last backward; predicted = the\n"
      " simulator's, stage %zu's seconds per model FLOP and the messages' latency in the balanced run priced\n"
      " over every stage's blocks at its declared speed; speeds = each stage's model FLOPs per second in the run over "
      "stage %zu's;\n"
      " at speeds = the same prediction at those measured speeds)\n",
      fastest_stage, fastest_stage);
  std::printf("%-10s %-24s %10s %10s %10s  %-12s %10s %10s\n", "split", "blocks by stage", "tokens/s", "predicted",
              "meas/pred", "speeds", "at speeds", "meas/pred");
  std::fflush(stdout);
  auto schedule = schedules::generate_schedule(schedules::ScheduleKind::one_f_one_b, o.stages, o.microbatches, 1);
  if (!schedule) return error_exit(ExitCode::bad_input, schedule.error().message);
  const double tokens_per_step = static_cast<double>(o.microbatches) * o.batch * cfg.block_size;
  // The prediction at declared speeds prices both splits with the balanced run's rate and latency, so
  // their ratio is the simulator's alone and not one run's message noise against the other's.
  std::optional<StageRate> rate;
  std::optional<double> balanced_latency;
  double ratio[2][2] = {};        // [balanced, speed][measured, predicted] tokens/s
  const std::pair<const char*, const std::vector<compute::StageLayers>*> splits[] = {{"balanced", &*balanced},
                                                                                     {"speed", &*by_speed}};
  for (std::size_t k = 0; k < std::size(splits); ++k) {
    const auto& [name, split] = splits[k];
    placement.split = *split;
    auto steps = run_steps(*schedule, o, placement);
    if (!steps) {
      std::printf("%-10s %s\n", name, steps.error().message.c_str());
      continue;
    }
    std::vector<double> flushes;
    for (const StepTimes& step : *steps) flushes.push_back(flush_seconds(*schedule, step));
    const double latency = median_transfer(*schedule, *steps);
    if (!rate) rate = stage_rate(*schedule, *steps, fastest_stage, stage_work(cfg, (*split)[fastest_stage]));
    if (!balanced_latency) balanced_latency = latency;
    auto predicted = predicted_flush(*schedule, cfg, *split, shares, *rate, *balanced_latency);
    if (!predicted) return error_exit(ExitCode::failure, predicted.error().message);
    ratio[k][0] = tokens_per_step / median(flushes);
    ratio[k][1] = tokens_per_step / *predicted;
    // What the quota and the machine gave each stage: its seconds per unit of work against the fastest's.
    std::vector<double> seconds_per_work;
    for (std::size_t s = 0; s < split->size(); ++s) {
      const StageRate r = stage_rate(*schedule, *steps, s, stage_work(cfg, (*split)[s]));
      seconds_per_work.push_back(r.forward + r.backward);
    }
    std::string speeds;
    std::vector<double> measured_speeds;
    for (double seconds : seconds_per_work) {
      measured_speeds.push_back(seconds_per_work[fastest_stage] / seconds);
      speeds += fmt::format("{}{:.2f}", speeds.empty() ? "" : ",", measured_speeds.back());
    }
    // The simulator given what the quota really gave each stage, not what was declared.
    auto at_speeds = predicted_flush(*schedule, cfg, *split, measured_speeds, *rate, latency);
    if (!at_speeds) return error_exit(ExitCode::failure, at_speeds.error().message);
    const double at_speeds_tokens = tokens_per_step / *at_speeds;
    std::printf("%-10s %-24s %10.0f %10.0f %10.3f  %-12s %10.0f %10.3f\n", name, blocks_of(*split).c_str(), ratio[k][0],
                ratio[k][1], ratio[k][0] / ratio[k][1], speeds.c_str(), at_speeds_tokens,
                ratio[k][0] / at_speeds_tokens);
    std::fflush(stdout);
  }
  if (ratio[0][0] > 0 && ratio[1][0] > 0)
    std::printf("speed / balanced: %.3fx measured, %.3fx predicted\n", ratio[1][0] / ratio[0][0],
                ratio[1][1] / ratio[0][1]);
  return to_int(ExitCode::success);
}

}  // namespace

int run_bench_pipeline(const BenchPipelineOptions& o) {
  if (!o.stage_speeds.empty()) return run_bench_split(o);
  const compute::GPTConfig cfg = bench_model(o);
  std::printf(
      "bench pipeline: %s (%d layers), p=%d stages (1 process x 1 thread each), m=%d micro-batches of %d x seq %d, "
      "median of %d steps\n",
      o.model.c_str(), cfg.n_layer, o.stages, o.microbatches, o.batch, cfg.block_size, o.steps);
  // More stages than cores: the stages take turns on them, so every figure includes that sharing.
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  if (o.stages > cores)
    std::printf("oversubscribed: %d stages on %d cores, %.3g processes per core\n", o.stages, cores,
                static_cast<double>(o.stages) / cores);
  std::printf(
      "(bubble = 1 - forward and backward time / (p x flush, first forward to last backward), per step;\n"
      " the simulator runs the same streams with the latency measured for messages (transfer) and costs\n"
      " measured in the same run: per op = each step from its own forwards' and backwards' costs where\n"
      " they stand in its stream, the median over the steps; per stage = the stage's mean forward and\n"
      " mean backward everywhere;\n"
      " shared/alone = how much longer an op takes while another stage computes than alone)\n");
  std::printf("%-16s %9s %9s %10s %12s %12s %13s %9s %10s\n", "schedule", "measured", "sim op", "sim stage",
              "closed form", "transfer ms", "shared/alone", "meas/sim", "tokens/s");
  std::fflush(stdout);
  // Interleaving needs equal chunks: the smallest v >= 2 that splits the layers evenly (small's 6
  // layers on 2 stages: v = 3).
  int chunks = o.virtual_stages > 0 ? o.virtual_stages : 2;
  while (o.virtual_stages == 0 && chunks * o.stages <= cfg.n_layer && cfg.n_layer % (chunks * o.stages) != 0) ++chunks;
  // ZB-V needs 2p equal chunks (small on 2 stages: give --layers 4 or 8); where the layers do not
  // cut so, its line says why.
  const std::vector<std::pair<schedules::ScheduleKind, int>> kinds = {{schedules::ScheduleKind::gpipe, 1},
                                                                      {schedules::ScheduleKind::one_f_one_b, 1},
                                                                      {schedules::ScheduleKind::interleaved, chunks},
                                                                      {schedules::ScheduleKind::zb_h1, 1},
                                                                      {schedules::ScheduleKind::zb_v, 2}};
  // Tokens per second over the forward/backward part of a step (no gradient sums, no update).
  const double tokens_per_step = static_cast<double>(o.microbatches) * o.batch * cfg.block_size;
  for (const auto& [kind, chunks] : kinds) {
    std::string name(schedules::to_string(kind));
    if (chunks > 1) name += " v=" + std::to_string(chunks);
    auto figures = measure(kind, chunks, o);
    if (!figures) {
      std::printf("%-16s %s\n", name.c_str(), figures.error().message.c_str());
      continue;
    }
    std::printf("%-16s %9.3f %9.3f %10.3f %12.3f %12.2f %13.2f %9.3f %10.0f\n", name.c_str(), figures->measured,
                figures->simulated_per_op, figures->simulated_per_stage, figures->closed_form, figures->transfer * 1e3,
                figures->shared_over_alone, figures->measured / figures->simulated_per_op,
                tokens_per_step / figures->flush);
    std::fflush(stdout);
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
  command
      ->add_option("--stage-speeds", options->stage_speeds,
                   "relative speed of each stage (1,0.5): 1f1b split balanced and by speed, each slower stage held to "
                   "its share of a core by a CPU quota")
      ->type_name("LIST");
  command->add_option("--warmup", options->warmup, "unmeasured steps first")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  return refusing_unknown(*command, [options] { return run_bench_pipeline(*options); });
}

}  // namespace troupe::apps
