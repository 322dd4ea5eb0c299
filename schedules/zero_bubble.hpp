#pragma once
// Compute orders of the zero-bubble schedules (Qi et al., "Zero Bubble Pipeline Parallelism",
// 2024): every backward split into B (backward_input, on the critical path: its gradient goes to
// the previous virtual stage) and W (backward_weights, needed only by the optimizer), W placed
// where 1F1B idles.
//
// zb-h1 (v = 1) is the paper's hand-made ZB-H1: 1F1B's warm-up of p - s - 1 forwards, then F, B
// pairs with stage s's W's running s micro-batches behind its B's, then in the cool-down one W
// after each B and the rest at the end. A pair is held from its forward to its W, so every stage
// holds at most p: 1F1B's first stage's activations, the peak 1F1B has. With F = B = W the bubble
// is (p-1)/(3m+p-1), a third of 1F1B's (p-1)/(m+p-1) in the limit of many micro-batches.
//
// zb-v (v = 2 in the V placement, schedule.hpp) comes from a list scheduler run on unit costs
// (F = B = W = 1 per chunk) in lock step over all stages: at each step a stage runs, of what its
// inputs allow,
//
//   1. the B whose gradient has arrived (lowest micro-batch, then the virtual stage nearest the
//      loss): the critical path goes first;
//   2. else a forward whose activations have arrived, while fewer than 2p (micro-batch, chunk)
//      pairs are held on the stage (forward run, W not yet): each chunk is half a stage, so that
//      is 1F1B's first stage's p micro-batches;
//   3. else the oldest owed W;
//   4. else nothing (a bubble).

// Per chunk, forwards, B's and W's each run in micro-batch order (so the weight gradients are
// summed in 1F1B's order). The orders are consistent (every op's input is made earlier by some
// stage); place_transfers() adds the sends and recvs.

#include <vector>

#include "schedules/schedule.hpp"

namespace troupe::schedules {

// `shape` is a zb-h1 or zb-v schedule without streams; one compute order per stage.
std::vector<std::vector<Instruction>> zero_bubble_computes(const Schedule& shape);

}  // namespace troupe::schedules
