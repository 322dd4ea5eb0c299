#pragma once
// What `troupe bench pipeline`'s comparison of schedules and its --stage-speeds comparison of
// splits share: the bench's model, and a schedule's measured steps, p forked stage processes (one
// thread each) training o.warmup + o.steps steps with every op traced, with the figures both read
// from them.

#include <vector>

#include "apps/bench/bench_commands.hpp"
#include "compute/expected.hpp"
#include "compute/model/gpt_config.hpp"
#include "compute/model/stage_split.hpp"
#include "schedules/schedule.hpp"
#include "schedules/simulator.hpp"

namespace troupe::apps {

class CpuQuota;

// One measured step of every stage: step[stage][instruction].
using StepTimes = std::vector<std::vector<schedules::OpTiming>>;

// The preset, with --layers blocks when given.
compute::GPTConfig bench_model(const BenchPipelineOptions& o);

// How a run places its layers and holds its stages: `split` (empty: balanced for the schedule),
// and per stage the quota it joins (null: none, a whole core).
struct StagePlacement {
  std::vector<compute::StageLayers> split;
  std::vector<const CpuQuota*> quotas;
};

// Every measured step of `schedule` run by p forked stages.
Expected<std::vector<StepTimes>> run_steps(const schedules::Schedule& schedule, const BenchPipelineOptions& o,
                                           const StagePlacement& placement);

// The simulator's definition on measured times: 1 − Σ forward and backward seconds / (p × flush),
// flush from the step's first forward to its last backward, B or W (the simulator starts every
// stage at 0, which is where the first forward starts).
double flush_seconds(const schedules::Schedule& schedule, const StepTimes& step);

// The median over the steps of the messages' latency (transfer_times), 0 where none waited.
double median_transfer(const schedules::Schedule& schedule, const std::vector<StepTimes>& steps);

// The median over the steps of the runtime's time between two computes of a stage where the
// second has no input to wait for (the simulator's dispatch), 0 where there is none.
double median_dispatch(const schedules::Schedule& schedule, const std::vector<StepTimes>& steps);

}  // namespace troupe::apps
