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
// zb-v (v = 2 in the V placement, schedule.hpp) is the V schedule of "Pipeline Parallelism with
// Controllable Memory" (Qi et al., 2024) as its authors' scheduler builds it, on unit costs
// (F = B = W per chunk, a message a hundredth of that; zero_bubble_v.cpp):
//
//   1. warm-up: a forward of chunk 0 on every stage; then from the bottom of the V up, each
//      stage's first forward of chunk 1, with as many chunk-0 forwards before it as fit while it
//      waits; then forwards of both chunks in turns until each stage has run as many as the one
//      above it;
//   2. 2m rounds of one B per stage (chunk 0's when its gradient is there, else chunk 1's), then
//      at most one forward per stage (chunk 1's when its activations are there, else chunk 0's),
//      each preceded by owed W's where the stage would otherwise wait for its input, and by one
//      more W where the wait would exceed the idle time the stage may let in;
//   3. the W's still owed.
//
// A stage holds a pair from its forward to its W, at most 2p pairs (each chunk is half a stage,
// so that is 1F1B's first stage's p micro-batches); a W runs first whenever another forward
// would pass that. The plan is made four ways (a W before a chunk-1 B or not, before a forward
// or not) and each is remade letting every stage idle as long as the worst stage did, while
// that lowers the worst stage's idle time; the best is kept.

// Per chunk, forwards, B's and W's each run in micro-batch order (so the weight gradients are
// summed in 1F1B's order). The orders are consistent (every op's input is made earlier by some
// stage); place_transfers() adds the sends and recvs.

#include <vector>

#include "schedules/schedule.hpp"

namespace troupe::schedules {

// `shape` is a zb-h1 or zb-v schedule without streams; one compute order per stage.
std::vector<std::vector<Instruction>> zero_bubble_computes(const Schedule& shape);

// zb-v's part of zero_bubble_computes (zero_bubble_v.cpp).
std::vector<std::vector<Instruction>> zb_v_computes(const Schedule& shape);

}  // namespace troupe::schedules
