// A schedule's measured steps (pipeline_steps.hpp): each forked stage process reports when every
// instruction of its stream ran, read from its trace.

#include "apps/bench/pipeline_steps.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <string>
#include <tuple>

#include "actors/worker/pipeline_trainer.hpp"
#include "apps/bench/bench_figures.hpp"
#include "apps/bench/bench_stage.hpp"
#include "apps/bench/cpu_quota.hpp"
#include "comm/bootstrap.hpp"
#include "schedules/checker.hpp"

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

// A stage's computes in the order it ran them: a W that filled a wait ran before its place.
std::vector<std::size_t> computes_as_run(const schedules::Schedule& schedule, const StepTimes& step, std::size_t s) {
  std::vector<std::size_t> computes;
  for (std::size_t i = 0; i < step[s].size(); ++i)
    if (schedules::is_compute(schedule.streams[s][i].op)) computes.push_back(i);
  std::sort(computes.begin(), computes.end(),
            [&](std::size_t a, std::size_t b) { return step[s][a].start < step[s][b].start; });
  return computes;
}

// The message a compute of stage s waits for; none for a W (it reads what its B kept), a first
// stage's forward or a last stage's B.
std::optional<schedules::Transfer> input_of(const schedules::Schedule& schedule, std::size_t s,
                                            const schedules::Instruction& ins) {
  if (ins.op == schedules::Op::backward_weights) return std::nullopt;
  const schedules::Op input = ins.op == schedules::Op::forward ? schedules::Op::recv_act : schedules::Op::recv_grad;
  return schedules::transfer_of(schedule, static_cast<int>(s), {input, ins.microbatch, ins.chunk, -1});
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
    double previous_end = -1e300;
    for (std::size_t i : computes_as_run(schedule, step, s)) {
      const auto transfer = input_of(schedule, s, schedule.streams[s][i]);
      if (transfer && previous_end < posted.at(*transfer)) times.push_back(step[s][i].start - posted.at(*transfer));
      previous_end = step[s][i].end;
    }
  }
  return times;
}

// The runtime's own time between two computes of a stage: before each compute that has no input
// to wait for, the gap since the stage's previous compute ended.
std::vector<double> dispatch_times(const schedules::Schedule& schedule, const StepTimes& step) {
  std::vector<double> times;
  for (std::size_t s = 0; s < step.size(); ++s) {
    const std::vector<std::size_t> computes = computes_as_run(schedule, step, s);
    for (std::size_t k = 1; k < computes.size(); ++k)
      if (!input_of(schedule, s, schedule.streams[s][computes[k]]))
        times.push_back(step[s][computes[k]].start - step[s][computes[k - 1]].end);
  }
  return times;
}

}  // namespace

// The preset, with --layers blocks when given.
compute::GPTConfig bench_model(const BenchPipelineOptions& o) {
  compute::GPTConfig cfg = *compute::gpt_preset(o.model);
  if (o.layers > 0) cfg.n_layer = o.layers;
  return cfg;
}

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

double median_dispatch(const schedules::Schedule& schedule, const std::vector<StepTimes>& steps) {
  std::vector<double> times;
  for (const StepTimes& step : steps)
    for (double t : dispatch_times(schedule, step)) times.push_back(t);
  return times.empty() ? 0.0 : median(times);
}

}  // namespace troupe::apps
