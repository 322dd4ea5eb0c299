#pragma once
// Schedule generators. Every kind is the same three phases, as in Megatron-Core's
// forward_backward_pipelining_*; the kinds differ only in how many forwards the warmup runs,
// and that number is computed in one place, warmup_microbatches():
//
//   warmup    forward only: the first w of the stage's m·v (micro-batch, chunk) pairs
//   steady    1F1B: forward pair w+i, then backward pair i, for i = 0 .. m·v-w-1
//   cooldown  backward only: the pairs still owed a backward
//
//   gpipe        w = m                           (every forward, then every backward)
//   1f1b         w = min(p - s - 1, m)           (stage s; at most p - s activations stashed)
//   interleaved  w = min(2(p - s - 1) + (v - 1)p, m·v)
//
//   zb-h1, zb-v  backward split into B and W, from a list scheduler (zero_bubble.hpp); w is
//                the forwards it runs before the stage's first B
//
// Pairs are visited in Megatron's interleaved order: micro-batches in groups of p, each
// group through chunk 0, then chunk 1, ...; backward visits the chunks in reverse. With
// v = 1 that is simply micro-batch order. Generators fix only this compute order;
// place_transfers() (transfers.hpp) adds the sends and recvs and the closing reduce_grads,
// optimizer_step.

#include "compute/expected.hpp"
#include "schedules/schedule.hpp"

namespace troupe::schedules {

// The rules every kind shares (p, m, v at least 1) and each kind's own: gpipe, 1f1b and zb-h1
// take v = 1; interleaved needs p >= 2, v >= 2 and m a multiple of p (Megatron's rule); zb-v
// needs p >= 2 and v = 2.
Status check_schedule_shape(ScheduleKind kind, int stages, int microbatches, int chunks);

// Forward passes stage `stage` runs before its first backward (counted in (micro-batch,
// chunk) pairs). The shape must pass check_schedule_shape.
int warmup_microbatches(ScheduleKind kind, int stages, int microbatches, int chunks, int stage);

Expected<Schedule> generate_schedule(ScheduleKind kind, int stages, int microbatches, int chunks = 1);

}  // namespace troupe::schedules
