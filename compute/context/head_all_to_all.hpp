#pragma once
// Attention by head all-to-all over a context group (DeepSpeed-Ulysses; context_attention.hpp
// says what it computes). With G = NH / C heads per rank and Cg = G * hs their channels:
//
// Forward, rank r:
//   1. all-to-all: block j of r's send is its rows' q, k and v of head group j, (B, T / C, 3 Cg);
//      r receives block i, rank i's rows of head group r, from each rank i.
//   2. the blocks go to their global positions (context_split.hpp): qkv of head group r over
//      the whole sequence, (B, T, 3 Cg), and the ordinary causal attention runs on it.
//   3. all-to-all back: block i is rank i's rows of the output, (B, T / C, Cg); r receives its own
//      rows of head group j from each rank j and puts them at columns j Cg.
//   Kept for the backward: the head group's log-sum-exp over the whole sequence, (B, G, T) — as
//   many values as the ring's lse.
// Backward: steps 1 and 2 again on the rank's own q, k and v (the head group's qkv over the
// whole sequence is not kept: it would be as large as the rank's qkv, a third all-to-all is
// cheaper than the memory), the same steps on dout (sequence to heads), the ordinary attention
// backward, and dqkv (heads to sequence), which lands in each rank's q, k and v columns of group j.

#include "compute/context/context_attention.hpp"

namespace troupe::compute::context {

template <typename Real>
std::unique_ptr<ContextAttention<Real>> make_head_all_to_all(const ContextShape& shape, ContextExchange& exchange);

}  // namespace troupe::compute::context
