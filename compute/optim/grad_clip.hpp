#pragma once
// Global-norm gradient clipping: one norm over every gradient, so the update's direction is
// kept and only its length is capped.

#include "compute/backend.hpp"

namespace troupe::compute {

// Returns the gradient norm before clipping; scales grads by max_norm / norm when it exceeds
// max_norm (> 0). The norm is accumulated in double.
double clip_grad_norm(Backend& backend, Tensor& grads, double max_norm);
// The scaling step alone, for gradients whose norm was computed elsewhere (a ZeRO-2 shard:
// the norm is over every rank's shard, the scaling only over this one).
void scale_to_norm(Backend& backend, Tensor& grads, double norm, double max_norm);

}  // namespace troupe::compute
