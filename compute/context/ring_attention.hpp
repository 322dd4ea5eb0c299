#pragma once
// Ring attention over a context group (context_attention.hpp says what it computes).
//
// Forward, rank r of C, its rows being chunks r and 2C - 1 - r (halves 0 and 1):
//   step 0: kv = the k and v of r's own rows, (B, T / C, 2 * channels).
//   step s = 0 .. C - 1: kv holds the rows of rank j = r - s (mod C).
//     a. unless s = C - 1, begin shifting kv to r + 1 and receiving r - 1's (the one it held).
//     b. for each query half a of r and key half b of j: chunk(j, b) < chunk(r, a) runs every key
//        (KeyMask::none), chunk(j, b) = chunk(r, a) the causal diagonal, a later chunk nothing;
//        each result merges into the rows' running output by log-sum-exp:
//          lse = log(e^lse1 + e^lse2),  out = e^(lse1 - lse) out1 + e^(lse2 - lse) out2.
//     c. finish the shift; the received block is the next step's kv.
//   The load-balanced split makes step b the same work on every rank and step: two chunk pairs.
//   Kept for the backward: out and lse of the rank's rows.
//
// Backward: D = rowsum(dout * out) per head and row, once. A block travels as
// [dk dv | k v] (each (B, T / C, 2 * channels)), dk and dv starting at zero at home:
//   step s = 0 .. C - 1: the block of rank j = r - s;
//     a. for each chunk pair as above: dq of r's rows and dk, dv of j's rows += the pair's
//        gradients (the probabilities recomputed from the full rows' lse, softmax backward with D).
//     b. shift the block to r + 1: all of it before the last step, only [dk dv] at the last,
//        which brings every rank its own dk and dv back (C shifts in all).
//   The shift needs what a. computed, so the backward's transfers do not overlap its compute.

#include "compute/context/context_attention.hpp"

namespace troupe::compute::context {

template <typename Real>
std::unique_ptr<ContextAttention<Real>> make_ring_attention(const ContextShape& shape, ContextExchange& exchange);

}  // namespace troupe::compute::context
