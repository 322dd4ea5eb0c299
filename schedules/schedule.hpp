#pragma once
// A pipeline schedule: one instruction stream per stage, plus the shape it was made for
// (p stages, m micro-batches, v model chunks per stage).
//
// Virtual stages: the model is cut into p·v consecutive pieces. Stage s holds chunks
// 0..v-1, which are virtual stages s, s+p, ..., (v-1)p+s (Megatron's interleaving), so
// virtual stage k lives on stage k % p as chunk k / p; under ZB-V's V placement chunk 1 is
// virtual stage 2p-1-s instead. Activations always flow from virtual
// stage k to k+1 and gradients from k+1 to k; with v > 1 the last stage's chunk c therefore
// sends to stage 0's chunk c+1. Without interleaving v = 1 and virtual stage = stage.
//
// Transfer is the one place that says which message a send or recv belongs to: both ends
// derive the same key from their own instruction, which is how the checker pairs them and
// how the simulator delivers them.

#include <compare>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "compute/expected.hpp"
#include "schedules/instruction.hpp"

namespace troupe::schedules {

enum class ScheduleKind { gpipe, one_f_one_b, interleaved, zb_h1, zb_v };

// Every kind, in the order pipeline.schedule lists them: the config parser reads a name with these.
inline constexpr ScheduleKind schedule_kinds[] = {ScheduleKind::gpipe, ScheduleKind::one_f_one_b,
                                                  ScheduleKind::interleaved, ScheduleKind::zb_h1, ScheduleKind::zb_v};
std::string_view to_string(ScheduleKind kind);  // "gpipe", "1f1b", "interleaved", "zb-h1", "zb-v"
// Zero-bubble kinds split every backward into backward_input (B) and backward_weights (W).
inline bool splits_backward(ScheduleKind kind) { return kind == ScheduleKind::zb_h1 || kind == ScheduleKind::zb_v; }
// Whether a stage whose F or B would wait for its input runs its next W first (simulator.hpp's
// fill_waits_with_weights): ZB-V's, whose two chunks leave a stage Ws owed at most of its waits.
// Not ZB-H1's: its Ws already stand in its bubbles, and most of its other waits are a message in
// transit, which a W run first would delay by the W (`troupe schedule` at p 2, m 8, W 0.35 of a
// backward and a latency of 0.05 forwards: ZB-H1's bubble 0.070 without, 0.091 with; ZB-V's
// 0.031 without, 0.029 with).
inline bool fills_waits_with_weights(ScheduleKind kind) { return kind == ScheduleKind::zb_v; }

struct Schedule {
  ScheduleKind kind = ScheduleKind::one_f_one_b;
  int stages = 1;                                 // p
  int microbatches = 1;                           // m
  int chunks = 1;                                 // v: model chunks per stage
  std::vector<std::vector<Instruction>> streams;  // streams[stage]

  int virtual_stages() const { return stages * chunks; }
  // ZB-V places the chunks in a V (v_shape()): odd chunks run the stages backwards, so stage s
  // holds virtual stages s and 2p-1-s and the last virtual stage sits on stage 0 beside the first.
  bool v_shape() const { return kind == ScheduleKind::zb_v; }
  int virtual_stage(int stage, int chunk) const {
    return chunk * stages + (v_shape() && chunk % 2 == 1 ? stages - 1 - stage : stage);
  }
  int stage_of(int virtual_stage) const {
    const int at = virtual_stage % stages;
    return v_shape() && chunk_of(virtual_stage) % 2 == 1 ? stages - 1 - at : at;
  }
  int chunk_of(int virtual_stage) const { return virtual_stage / stages; }
};

// The message a send or recv takes part in, named the same way from either end.
struct Transfer {
  bool gradient = false;  // false: activations to virtual stage from + 1; true: a gradient to from - 1
  int microbatch = 0;
  int from = 0;  // the sending virtual stage

  auto operator<=>(const Transfer&) const = default;
  int to() const { return gradient ? from - 1 : from + 1; }
};

// Whether neighbouring virtual stages sit on one stage (the bottom of ZB-V's V: virtual stages
// p-1 and p on stage p-1). Such a hop is no message: the stage hands the activations, or the
// gradient, from one of its chunks to the other, and its stream has no send or recv for it.
inline bool local_hop(const Schedule& schedule, int from, int to) {
  return schedule.stage_of(from) == schedule.stage_of(to);
}

// The transfer `instruction` on `stage` takes part in; nullopt when it is no send or recv, or
// when its virtual stage has no neighbour on that side (activations into the first virtual
// stage, a gradient out of it; activations out of the last, a gradient into it) or the
// neighbour is on the same stage (local_hop). Does not look at instruction.peer: the checker
// compares that with the stage this returns.
std::optional<Transfer> transfer_of(const Schedule& schedule, int stage, const Instruction& instruction);

// The stage at the other end of `instruction`'s transfer, or -1 when there is none.
int peer_of(const Schedule& schedule, int stage, const Instruction& instruction);

// "1f1b p=2 m=3 v=1", then per stage "stage 0:" and one "  i  instruction" line per step.
std::string to_string(const Schedule& schedule);

}  // namespace troupe::schedules
