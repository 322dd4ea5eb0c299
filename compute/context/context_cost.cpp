#include "compute/context/context_cost.hpp"

namespace troupe::compute::context {

ContextLayerCost context_layer_cost(ContextMethod method, int B, int T, int channels, int heads, int shards) {
  if (shards <= 1) return {};
  const double C = shards, rows = double(B) * T / C, ch = channels;
  const double lse = rows * heads;  // one per row and head, (B, heads, T / C)
  ContextLayerCost cost;
  if (method == ContextMethod::ring) {
    cost.kept = rows * ch + lse;
    cost.held = 2 * rows * 4 * ch + lse;
    cost.forward_sent = (C - 1) * rows * 2 * ch;
    cost.backward_sent = (C - 1) * rows * 4 * ch + rows * 2 * ch;
  } else {
    // rows · C = B · T: the whole sequence of the head group's channels / C.
    cost.kept = lse;
    cost.held = rows * (3 * ch + ch + 3 * ch + 2 * 3 * ch) + lse;
    cost.forward_sent = (C - 1) / C * rows * (3 + 1) * ch;
    cost.backward_sent = (C - 1) / C * rows * (3 + 1 + 3) * ch;
  }
  return cost;
}

}  // namespace troupe::compute::context
