#pragma once
// What one context-parallel attention layer costs a rank of its context group, in values of the
// training dtype, for a micro-batch of B sequences of T positions over C shards (`channels` wide,
// `heads` heads): what the layer keeps from its forward to its backward, what the exchange holds
// while the layer runs, and what the rank sends. The layout planner (schedules/layout_plan.hpp)
// adds these to the activations of the rank's T / C rows; docs/context-parallel.md ("Memory and
// the plan") has the figures: kept and held are the buffers ring_attention.cpp and
// head_all_to_all.cpp allocate, and tests/compute/context/test_context_cost.cpp holds what is sent
// against the bytes a rank hands its exchange.
//
//   ring        kept: out and lse of the rank's rows          (B · T/C · channels + B · heads · T/C)
//               held: the backward's [dk dv | k v] block and the block arriving, and the rows' D
//                     (2 · B · T/C · 4 channels + B · heads · T/C; the forward's two K/V blocks are less)
//               sent: forward C − 1 shifts of B · T/C · 2 channels; backward C − 1 shifts of
//                     B · T/C · 4 channels and one of B · T/C · 2 channels
//   all_to_all  kept: the head group's lse over the whole sequence (B · heads/C · T)
//               held: the backward's q, k, v, dout and dqkv over the whole sequence for the head
//                     group, its row dots, and the blocks sent and received (B · T/C · (3 channels
//                     + channels + 3 channels + 2 · 3 channels) + B · heads · T/C)
//               sent: (C − 1)/C of the all-to-alls' blocks: forward B · T/C · (3 + 1) channels,
//                     backward B · T/C · (3 + 1 + 3) channels (q, k and v moved again)

#include "compute/context/context_method.hpp"

namespace troupe::compute::context {

struct ContextLayerCost {
  double kept = 0;           // values per layer and micro-batch in flight, forward to backward
  double held = 0;           // values the exchange holds while one layer runs (shared by the layers)
  double forward_sent = 0;   // values the rank sends in the layer's forward
  double backward_sent = 0;  // and in its backward
};

// In double: sizes beyond any machine still give a figure. `shards` 1 costs nothing.
ContextLayerCost context_layer_cost(ContextMethod method, int B, int T, int channels, int heads, int shards);

}  // namespace troupe::compute::context
