// troupe bench pipeline: for GPipe, 1F1B and interleaved 1F1B (the smallest v >= 2 that splits
// the layers evenly), p stages as p forked
// processes (1 thread each) train a few steps of `small`, every op traced; the measured bubble
// of each step is 1 − Σ forward and backward time / (p × the step's flush, from the first
// forward to the last backward over all stages). Beside it: the simulator's prediction from
// the forward and backward times measured in the same run (per stage), and the closed form.

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <string>

#include "actors/actor_system_setup.hpp"
#include "actors/mailbox_comm.hpp"
#include "actors/pipeline_trainer.hpp"
#include "apps/commands.hpp"
#include "comm/bootstrap.hpp"
#include "compute/random.hpp"
#include "schedules/checker.hpp"
#include "schedules/generate.hpp"
#include "schedules/simulator.hpp"

namespace troupe::apps {
namespace {

// What one stage measured, as the bootstrap's report: per measured step its busy seconds, first
// forward start and last backward end; then its mean forward and backward seconds per chunk.
struct StageReport {
  std::vector<double> busy, first_start, last_end;
  double forward = 0, backward = 0;
};

std::vector<std::uint8_t> pack(const StageReport& r) {
  std::vector<double> values;
  for (std::size_t i = 0; i < r.busy.size(); ++i) values.insert(values.end(), {r.busy[i], r.first_start[i], r.last_end[i]});
  values.insert(values.end(), {r.forward, r.backward});
  std::vector<std::uint8_t> bytes(values.size() * sizeof(double));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

StageReport unpack(const std::vector<std::uint8_t>& bytes) {
  std::vector<double> values(bytes.size() / sizeof(double));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(double));
  StageReport r;
  for (std::size_t i = 0; i + 2 < values.size(); i += 3) {
    r.busy.push_back(values[i]);
    r.first_start.push_back(values[i + 1]);
    r.last_end.push_back(values[i + 2]);
  }
  r.forward = values[values.size() - 2];
  r.backward = values[values.size() - 1];
  return r;
}

Expected<std::vector<std::uint8_t>> stage_body(comm::Engine& engine, const BenchPipelineOptions& o,
                                               const schedules::Schedule& schedule, const schedules::CheckReport& check) {
  const compute::GPTConfig cfg = *compute::gpt_preset(o.model);
  auto backend = compute::make_backend("cpu", 1);
  if (!backend) return backend.error();
  const int rank = engine.rank();
  const comm::Grid grid{1, o.stages, 1};
  actors::TroupeConfig actor_config;
  caf::actor_system system{actor_config};
  caf::scoped_actor worker{system};
  actors::MailboxComm mailbox(worker.ptr());
  monitor::WorkProgress progress;
  auto dp = comm::Communicator::create(engine, comm::dp_group(grid, rank));
  auto pp = comm::Communicator::create(engine, comm::pp_group(grid, rank));
  if (!dp) return dp.error();
  if (!pp) return pp.error();
  std::unique_ptr<comm::Communicator> embedding;
  if (rank == 0 || rank == o.stages - 1) {
    auto created = comm::Communicator::create(engine, comm::embedding_group(grid, rank));
    if (!created) return created.error();
    embedding = std::move(*created);
  }
  std::vector<std::uint16_t> stream(static_cast<std::size_t>(o.batch) * cfg.block_size * o.microbatches * 4 + 1);
  for (std::size_t i = 0; i < stream.size(); ++i)
    stream[i] = static_cast<std::uint16_t>(compute::splitmix64(i) % static_cast<std::uint64_t>(cfg.vocab_size));
  compute::TrainerOptions options;
  options.batch_size = o.batch;
  options.seq_len = cfg.block_size;
  options.lr = {1e-4, 1e-5, 0, o.warmup + o.steps};
  actors::PipelineSetup setup{cfg, schedule, check.peak_stashed[static_cast<std::size_t>(rank)], grid, rank, options};
  actors::PipelineTrainer trainer(std::move(setup), **backend, {engine, **dp, **pp, embedding.get()}, mailbox, progress,
                                  stream, stream);
  monitor::TraceRecorder trace;
  trainer.record_into(trace);
  for (int i = 0; i < o.warmup + o.steps; ++i) trainer.step();
  StageReport report;
  report.busy.assign(static_cast<std::size_t>(o.steps), 0.0);
  report.first_start.assign(static_cast<std::size_t>(o.steps), 1e300);
  report.last_end.assign(static_cast<std::size_t>(o.steps), 0.0);
  double forward = 0, backward = 0;
  int forwards = 0, backwards = 0;
  for (const monitor::TraceEvent& e : trace.events()) {
    if (e.category != "forward" && e.category != "backward") continue;
    const int step = std::stoi(e.args.front().second) - o.warmup;  // args[0] is the step
    if (step < 0) continue;
    const auto s = static_cast<std::size_t>(step);
    const double start = e.start_us * 1e-6, seconds = e.duration_us * 1e-6;
    report.busy[s] += seconds;
    report.first_start[s] = std::min(report.first_start[s], start);
    if (e.category == "backward") report.last_end[s] = std::max(report.last_end[s], start + seconds);
    (e.category == "forward" ? forward : backward) += seconds;
    ++(e.category == "forward" ? forwards : backwards);
  }
  report.forward = forward / std::max(1, forwards);
  report.backward = backward / std::max(1, backwards);
  return pack(report);
}

struct BubbleFigures {
  double measured = 0, simulated = 0, closed_form = 0;
};

Expected<BubbleFigures> measure(schedules::ScheduleKind kind, int chunks, const BenchPipelineOptions& o) {
  auto schedule = schedules::generate_schedule(kind, o.stages, o.microbatches, chunks);
  if (!schedule) return schedule.error();
  auto check = schedules::check_schedule(*schedule);
  if (!check) return check.error();
  auto results = comm::run_local_ranks(
      o.stages, [&](comm::Engine& engine) { return stage_body(engine, o, *schedule, *check); },
      std::chrono::minutes(20));
  if (!results) return results.error();
  std::vector<StageReport> stages;
  for (std::size_t r = 0; r < results->size(); ++r) {
    const auto& result = (*results)[r];
    if (!result.ok) return Error{"stage " + std::to_string(r) + ": " + result.error};
    stages.push_back(unpack(result.report));
  }
  std::vector<double> bubbles;
  for (int step = 0; step < o.steps; ++step) {
    double busy = 0, first = 1e300, last = 0;
    for (const StageReport& s : stages) {
      busy += s.busy[static_cast<std::size_t>(step)];
      first = std::min(first, s.first_start[static_cast<std::size_t>(step)]);
      last = std::max(last, s.last_end[static_cast<std::size_t>(step)]);
    }
    bubbles.push_back(1.0 - busy / (o.stages * (last - first)));
  }
  std::sort(bubbles.begin(), bubbles.end());
  schedules::CostModel costs;
  double forward = 0, backward = 0;
  for (const StageReport& s : stages) {
    forward += s.forward / o.stages;
    backward += s.backward / o.stages;
  }
  costs.forward = forward;
  costs.backward = backward;
  for (const StageReport& s : stages) {
    costs.forward_scale.push_back(s.forward / forward);
    costs.backward_scale.push_back(s.backward / backward);
  }
  auto simulated = schedules::simulate(*schedule, costs);
  if (!simulated) return simulated.error();
  const double p = o.stages, vm = static_cast<double>(chunks) * o.microbatches;
  return BubbleFigures{bubbles[bubbles.size() / 2], simulated->bubble, (p - 1) / (vm + p - 1)};
}

}  // namespace

int run_bench_pipeline(const BenchPipelineOptions& o) {
  const compute::GPTConfig cfg = *compute::gpt_preset(o.model);
  std::printf("bench pipeline: %s, p=%d stages (1 process x 1 thread each), m=%d micro-batches of %d x seq %d, "
              "median of %d steps\n",
              o.model.c_str(), o.stages, o.microbatches, o.batch, cfg.block_size, o.steps);
  std::printf("(bubble = 1 - forward and backward time / (p x step flush); the simulator runs the same streams with\n"
              " the forward and backward times measured per stage in the same run, zero latency)\n");
  std::printf("%-16s %10s %10s %12s %10s\n", "schedule", "measured", "simulated", "closed form", "meas/sim");
  std::fflush(stdout);
  // Interleaving needs equal chunks: the smallest v >= 2 that splits the layers evenly (small's 6
  // layers on 2 stages: v = 3).
  int chunks = 2;
  while (chunks * o.stages <= cfg.n_layer && cfg.n_layer % (chunks * o.stages) != 0) ++chunks;
  const std::vector<std::pair<schedules::ScheduleKind, int>> kinds = {
      {schedules::ScheduleKind::gpipe, 1}, {schedules::ScheduleKind::one_f_one_b, 1},
      {schedules::ScheduleKind::interleaved, chunks}};
  for (const auto& [kind, chunks] : kinds) {
    std::string name(schedules::to_string(kind));
    if (chunks > 1) name += " v=" + std::to_string(chunks);
    auto figures = measure(kind, chunks, o);
    if (!figures) {
      std::printf("%-16s %s\n", name.c_str(), figures.error().message.c_str());
      continue;
    }
    std::printf("%-16s %10.3f %10.3f %12.3f %10.3f\n", name.c_str(), figures->measured, figures->simulated,
                figures->closed_form, figures->measured / figures->simulated);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace troupe::apps
