#pragma once
// Predicts how long a schedule takes from per-op costs, by running its streams as the
// runtime does (non-blocking, through the comm engine): a stage executes its stream in
// order; a send or recv is posted and the stage goes on at once; a send's message is usable
// at the receiver `latency` seconds after it was posted; a forward or backward waits until
// its own input (the message its recv asked for) has arrived. Computes take their cost,
// posting takes none. Within a gap between two computes the order of sends and recvs
// therefore costs nothing here; it matters to a runtime with blocking sends, which is what
// check_schedule() models. The schedule should pass check_schedule() first.
//
// Bubble: the share of the forward/backward part during which stages sit idle,
//
//     bubble = 1 - Σ_s busy_s / (p × flush)
//
// where busy_s is stage s's forward and backward seconds (B and W of a split backward) and flush
// is when the last backward, B or W on any stage ends (every stage starts at 0). reduce_grads and optimizer_step come
// after the flush and are left out, so with uniform costs and zero latency GPipe and 1F1B give (p-1)/(m+p-1) exactly.

#include <cstddef>
#include <vector>

#include "compute/expected.hpp"
#include "schedules/schedule.hpp"

namespace troupe::schedules {

struct CostModel {
  double forward = 1.0;   // seconds per forward of one chunk of one micro-batch
  double backward = 2.0;  // seconds per backward of one chunk of one micro-batch
  // A split backward's W takes this share of `backward`, its B the rest (the paper's T_B = T_W).
  double weight_share = 0.5;
  double latency = 0.0;   // seconds from posting a send to its data being usable at the receiver
  double reduce_grads = 0.0;
  double optimizer_step = 0.0;
  // Empty: every stage alike. Otherwise one factor per stage on its forward, and on its
  // backward, costs (an unbalanced split: the stage with more layers; the loss head, which
  // weighs on one stage's forward and backward differently).
  std::vector<double> forward_scale;
  std::vector<double> backward_scale;
  // Empty: every stage at speed 1. Otherwise one relative speed per stage (declared, as
  // pipeline.stage_speeds, or measured): each forward and backward there takes its cost over the
  // speed, so a stage at 0.5 takes twice as long for the same layers. The scales above say how
  // much work a stage has; this says how fast it does it.
  std::vector<double> speeds;
  // Empty: forward and backward costs from the fields above. Otherwise one row per stage,
  // parallel to its stream: the seconds of each forward and backward where it stands in the
  // stream (other instructions' entries are not read). Costs measured op by op differ by
  // position: an op that runs while the neighbour stage also computes shares the machine
  // with it, and one in warm-up or cool-down may run alone.
  std::vector<std::vector<double>> op_costs;
  // A split backward's runtime fills waits with weights (pipeline_trainer.hpp): a stage whose next
  // F or B would wait for its input runs the stream's next W first, if that W's B has run — Ws
  // keep their order among themselves, so every gradient is the same sum.
  bool fill_waits_with_weights = false;
  // Seconds a stage spends between two of its computes on the runtime's own work (posting sends
  // and recvs, taking completions, tracing); it overlaps a wait for the next compute's input.
  double dispatch = 0.0;
};

struct OpTiming {
  double start = 0.0;  // when the stage reached the instruction (posted it, for a send or recv)
  double end = 0.0;    // when it finished; a recv ends when its message arrives
};

struct Simulation {
  double makespan = 0.0;     // when the last optimizer_step ends
  double flush = 0.0;        // when the last backward ends
  std::vector<double> busy;  // per stage: seconds of forward and backward
  double bubble = 0.0;
  std::vector<std::vector<OpTiming>> timings;  // timings[stage][i] for streams[stage][i]
};

// The cost a forward or backward (B, W) at streams[stage][i] takes at speed 1: its op_costs entry,
// or the model's forward, backward and weight share with the stage's scales.
double stream_cost(const Schedule& schedule, const CostModel& costs, int stage, std::size_t i);

// An Error for costs that are negative, a forward_scale, backward_scale, speeds or op_costs of the
// wrong shape, a speed that is not a positive number, and for streams that cannot finish even
// without blocking (an input that is never sent).
Expected<Simulation> simulate(const Schedule& schedule, const CostModel& costs);

}  // namespace troupe::schedules
