#pragma once
// Causal self-attention over a sequence whose positions are split over a context group
// (context_split.hpp): each rank gives the q, k and v of its own rows and gets the attention output
// of its own rows, equal to what one process computes over the whole sequence. Two methods:
//
//   ring        K and V blocks travel around the group; each rank runs its queries against the
//               block it holds while the next one arrives and merges the partial results by their
//               log-sum-exp (ring_attention.cpp). Backward: dK and dV travel with the blocks and
//               arrive home after C shifts.
//   all_to_all  q, k and v go from sequence-sharded to head-sharded (each rank gets NH / C heads of
//               the whole sequence), attention runs locally, the output goes back (DeepSpeed-
//               Ulysses; head_all_to_all.cpp). C must divide the heads.
//
// Shapes: qkv and dqkv (B, T / C, 3 * channels), out and dout (B, T / C, channels), the rank's rows
// in its local order. backward writes dqkv (=) for the last forward, given the same qkv.

#include <memory>

#include "compute/context/context_exchange.hpp"
#include "compute/context/context_method.hpp"
#include "compute/context/context_split.hpp"
#include "compute/expected.hpp"

namespace troupe::compute::context {

struct ContextShape {
  int B = 1;
  int channels = 0;
  int heads = 1;
  ContextSplit split;
};

template <typename Real>
class ContextAttention {
 public:
  using value_type = Real;
  virtual ~ContextAttention() = default;
  virtual Status forward(Real* out, const Real* qkv) = 0;
  virtual Status backward(Real* dqkv, const Real* dout, const Real* qkv) = 0;
};

// The method's attention for the calling rank of `exchange`, or an error naming context.method,
// context.shards and model.n_head when all_to_all cannot split the heads.
template <typename Real>
Expected<std::unique_ptr<ContextAttention<Real>>> make_context_attention(ContextMethod method,
                                                                         const ContextShape& shape,
                                                                         ContextExchange& exchange);

}  // namespace troupe::compute::context
