#pragma once
// Proves a set of streams sound, or names the first thing wrong with them. Rules, checked in
// this order (each error names the stage, the instruction index and the instruction):
//
//   1. shape      p, m, v at least 1 and one stream per stage; every micro-batch and chunk
//                 in range; every send/recv has a neighbour on that side and names the stage
//                 that holds it as its peer.
//   2. order      per stream: forward (mb, chunk) after its recv_act (except on virtual stage
//                 0), backward after its forward and after its recv_grad (except on the last
//                 virtual stage), send_act after the forward, send_grad after the backward;
//                 nothing twice; every (mb, chunk) forwarded and backwarded; the stream ends
//                 with reduce_grads, optimizer_step, which appear nowhere else. A split
//                 backward: backward_input stands where backward would (and send_grad after
//                 it), backward_weights after it, each once, never beside a backward of the
//                 same pair. At a V's bottom the upper chunk's next backward waits until the
//                 lower chunk's backward has taken the gradient handed down.
//   3. matching   every recv has its send on the peer stream. (Every send has its recv by
//                 rule 2: the receiving forward or backward must come after that recv.)
//   4. deadlock   all streams run in lock-step with blocking (rendezvous) sends: a send or
//                 recv completes only when the peer stands at the matching instruction. If no
//                 stage can move and some are not done, the cycle of waiting stages is named.
//                 Streams that pass run with any buffering at all, eager or rendezvous.
//
// The report counts, per stage, the peak of stashed activations: (micro-batch, chunk) pairs
// whose forward has run and whose backward (or backward_weights) has not, across all chunks of
// the stage; and the peak of pairs between backward_input and backward_weights, whose kept
// gradients a split backward holds on top (the schedule's memory bound is both).

#include <vector>

#include "compute/expected.hpp"
#include "schedules/schedule.hpp"

namespace troupe::schedules {

struct CheckReport {
  std::vector<int> peak_stashed;       // per stage
  std::vector<int> peak_weights_owed;  // per stage: pairs past backward_input, before backward_weights
  std::vector<int> instructions;  // per stage
  int transfers = 0;              // send/recv pairs in the whole schedule
};

Expected<CheckReport> check_schedule(const Schedule& schedule);

}  // namespace troupe::schedules
