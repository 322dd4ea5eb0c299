// troupe bench pipeline --stage-speeds (1,0.5): mixed hardware. Each stage slower than the fastest
// is held to its speed's share of a core by a CPU quota (cpu_quota.hpp), and 1F1B runs in turns
// split balanced (by parameters) and by speed (compute::split_layers_by_speed). Each split's
// tokens/s is set beside the simulator's: the fastest stage's forward and backward seconds per unit
// of model FLOPs, measured in the balanced run, priced over every stage's blocks
// (stage_compute_per_token) at its declared speed, with the messages' latency measured in the
// balanced run.

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <utility>

#include <spdlog/fmt/fmt.h>

#include "apps/bench/bench_commands.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/cpu_quota.hpp"
#include "apps/bench/pipeline_steps.hpp"
#include "apps/config/speeds.hpp"
#include "apps/exit_codes.hpp"
#include "schedules/generate.hpp"
#include "schedules/simulator.hpp"

namespace troupe::apps {
namespace {

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

}  // namespace

int run_bench_pipeline_split(const BenchPipelineOptions& o) {
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
  double ratio[2][2] = {};  // [balanced, speed][measured, predicted] tokens/s
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

}  // namespace troupe::apps
