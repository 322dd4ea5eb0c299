#pragma once
// The causal load-balanced split of a sequence over the C ranks of a context group. The T
// positions are cut into 2C chunks of T / 2C; rank r holds chunks r and 2C - 1 - r, as its local
// rows [0, T / 2C) and [T / 2C, T / C). Under the causal mask a query sees the keys at or before
// it, so an early chunk costs little and a late one much: pairing chunk r with its mirror gives
// every rank the same attention work (Megatron's context parallelism, the Llama 3 paper).
//
//   T = 8, C = 2, chunks of 2:   positions 0 1 | 2 3 | 4 5 | 6 7
//                                rank      0   |  1  |  1  |  0
//
// Everything outside attention (embeddings at the global positions, LayerNorm, MLP, the loss) runs
// on a rank's own rows as they are.

#include <cstddef>

#include "compute/expected.hpp"

namespace troupe::compute::context {

struct ContextSplit {
  int T = 0;       // positions of the whole sequence
  int shards = 1;  // C, ranks in the context group

  int chunk() const { return T / (2 * shards); }
  int local_rows() const { return T / shards; }
  // The chunk (of 2C) that local half `half` (0 or 1) of `rank` holds.
  int chunk_of(int rank, int half) const { return half == 0 ? rank : 2 * shards - 1 - rank; }
  // The global position of local row `row` of `rank`.
  int position(int rank, int row) const {
    const int c = chunk();
    return chunk_of(rank, row / c) * c + row % c;
  }
};

// The split of T positions over `shards` ranks, or an error naming context.shards when T is not
// a multiple of 2C.
Expected<ContextSplit> make_context_split(int T, int shards);

// Rows of (B, T, width) sequences: local (B, T / C, width) gets the rows `rank` holds of global, and
// put_rows writes back only the rows `rank` holds.
template <typename Real>
void take_rows(Real* local, const Real* global, int B, int width, const ContextSplit& split, int rank);
template <typename Real>
void put_rows(Real* global, const Real* local, int B, int width, const ContextSplit& split, int rank);

}  // namespace troupe::compute::context
