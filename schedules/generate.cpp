#include "schedules/generate.hpp"

#include <algorithm>
#include <string>

#include "schedules/transfers.hpp"
#include "schedules/zero_bubble.hpp"

namespace troupe::schedules {
namespace {

std::string shape_name(ScheduleKind kind, int stages, int microbatches, int chunks) {
  return std::string(to_string(kind)) + " p=" + std::to_string(stages) + " m=" + std::to_string(microbatches) +
         " v=" + std::to_string(chunks);
}

// The k-th (micro-batch, chunk) pair of a stage in Megatron's interleaved order.
Instruction nth_pair(const Schedule& shape, int k, Op op) {
  const int group = shape.stages * shape.chunks;
  int chunk = (k % group) / shape.stages;
  if (op == Op::backward) chunk = shape.chunks - 1 - chunk;
  return Instruction{op, (k / group) * shape.stages + k % shape.stages, chunk, -1};
}

}  // namespace

Status check_schedule_shape(ScheduleKind kind, int stages, int microbatches, int chunks) {
  const std::string where = "pipeline schedule " + shape_name(kind, stages, microbatches, chunks) + ": ";
  if (stages < 1) return Error{where + "needs at least 1 stage (p)"};
  if (microbatches < 1) return Error{where + "needs at least 1 micro-batch (m)"};
  if (chunks < 1) return Error{where + "needs at least 1 chunk per stage (v)"};
  if (kind == ScheduleKind::zb_v) {
    if (stages < 2) return Error{where + "the V placement needs at least 2 stages"};
    if (chunks != 2) return Error{where + "runs two chunks per stage in a V: v must be 2"};
    return {};
  }
  if (kind != ScheduleKind::interleaved) {
    if (chunks != 1) return Error{where + "runs one chunk per stage; only interleaved and zb-v take v > 1"};
    return {};
  }
  if (stages < 2) return Error{where + "interleaving needs at least 2 stages"};
  if (chunks < 2) return Error{where + "interleaving needs v >= 2 chunks per stage (with one, use 1f1b)"};
  if (microbatches % stages != 0) {
    return Error{where + "interleaving needs m a multiple of p, and " + std::to_string(microbatches) +
                 " micro-batches do not split into groups of " + std::to_string(stages)};
  }
  return {};
}

int warmup_microbatches(ScheduleKind kind, int stages, int microbatches, int chunks, int stage) {
  TROUPE_CHECK(check_schedule_shape(kind, stages, microbatches, chunks).ok(), "warmup of an illegal shape");
  TROUPE_CHECK(stage >= 0 && stage < stages, "stage outside the pipeline");
  switch (kind) {
    case ScheduleKind::gpipe: return microbatches;
    case ScheduleKind::one_f_one_b: return std::min(stages - stage - 1, microbatches);
    case ScheduleKind::interleaved:
      // Megatron-Core's count. Counting one slot per forward or backward, the stage's first
      // backward (micro-batch 0, chunk v-1) comes only after micro-batch 0 has passed all p·v
      // virtual stages and its gradient has come back p-s-1 hops: this many forwards fit before.
      return std::min(2 * (stages - stage - 1) + (chunks - 1) * stages, microbatches * chunks);
    case ScheduleKind::zb_h1:
    case ScheduleKind::zb_v: {
      // The list scheduler's (zero_bubble.hpp): the forwards before the stage's first B.
      const Schedule shape{kind, stages, microbatches, chunks, {}};
      const std::vector<Instruction> order = zero_bubble_computes(shape)[static_cast<std::size_t>(stage)];
      const auto first_input =
          std::find_if(order.begin(), order.end(), [](const Instruction& i) { return i.op == Op::backward_input; });
      return static_cast<int>(
          std::count_if(order.begin(), first_input, [](const Instruction& i) { return i.op == Op::forward; }));
    }
  }
  return 0;
}

Expected<Schedule> generate_schedule(ScheduleKind kind, int stages, int microbatches, int chunks) {
  if (Status shape = check_schedule_shape(kind, stages, microbatches, chunks); !shape) return shape.error();
  Schedule schedule{kind, stages, microbatches, chunks, {}};
  const int pairs = microbatches * chunks;
  if (splits_backward(kind)) {
    schedule.streams = place_transfers(schedule, zero_bubble_computes(schedule));
    return schedule;
  }
  std::vector<std::vector<Instruction>> computes(stages);
  for (int s = 0; s < stages; ++s) {
    const int warmup = warmup_microbatches(kind, stages, microbatches, chunks, s);
    std::vector<Instruction>& order = computes[s];
    // Warmup: forwards only, filling the pipeline.
    for (int k = 0; k < warmup; ++k) order.push_back(nth_pair(schedule, k, Op::forward));
    // Steady: one forward, one backward.
    for (int i = 0; i < pairs - warmup; ++i) {
      order.push_back(nth_pair(schedule, warmup + i, Op::forward));
      order.push_back(nth_pair(schedule, i, Op::backward));
    }
    // Cooldown: the backwards still owed, draining the pipeline.
    for (int k = pairs - warmup; k < pairs; ++k) order.push_back(nth_pair(schedule, k, Op::backward));
  }
  schedule.streams = place_transfers(schedule, computes);
  return schedule;
}

}  // namespace troupe::schedules
