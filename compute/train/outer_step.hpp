#pragma once
// DiLoCo's outer step (Douillard et al., 2023): K islands each take H inner steps alone from the
// same weights, then every island sends its pseudo-gradient — the weights at the last sync less
// its current weights — and every island applies the islands' mean pseudo-gradient Δ to the
// last-sync weights with SGD and Nesterov momentum, as torchft's DiLoCo does (torch.optim.SGD
// with nesterov=True, the pseudo-gradient in place of the gradient, the weights reset to the
// last sync first):
//
//     Δ = (Σ_i (w_sync − w_i)) / K
//     m = μ·m + Δ                    (m starts at 0, so the first sync's m is Δ)
//     w = w_sync − lr·(Δ + μ·m)
//     w_sync = w
//
// With lr 1 and μ 0 the new weights are the islands' weights averaged (to rounding). Every rank
// keeps w_sync and m for the parameters it holds; the inner optimizer's state (AdamW's moments)
// stays the island's own. compute/ knows no communication: the caller sums the pseudo-gradients
// over the islands (IslandGroup::sum). Host memory, f32 or f64.

#include <cstdint>
#include <functional>
#include <span>

#include "compute/tensor.hpp"

namespace troupe::compute {

struct OuterOptions {
  long every = 20;        // H: inner steps between syncs (train.diloco_steps)
  double lr = 0.7;        // train.outer_lr
  double momentum = 0.9;  // train.outer_momentum (Nesterov)
};

// A rank's place among the islands: `count` K, its island `index`, and `sum`, which adds a buffer
// over the K ranks that hold this rank's place in every island (in place; empty for one island).
struct IslandGroup {
  int count = 1;
  int index = 0;
  std::function<void(Tensor&)> sum;
};

class OuterStep {
 public:
  // The weights at the last sync start as `params` (copied); the momentum at zero.
  OuterStep(const Tensor& params, OuterOptions options);

  // Whether a sync follows the step that made `steps_taken` steps: every H steps, and after the
  // run's last step (`total_steps`), so that the run ends on the islands' common weights.
  bool due(long steps_taken, long total_steps) const;
  // This island's pseudo-gradient into `delta`: the last-sync weights less `params`.
  void pseudo_gradient(const Tensor& params, Tensor& delta) const;
  // The Nesterov step above from `summed`, the K islands' pseudo-gradients summed, into `params`;
  // the result becomes the last-sync weights.
  void apply(Tensor& params, const Tensor& summed, int islands);
  // One sync of this rank: pseudo_gradient, group.sum over the islands, apply.
  void sync(Tensor& params, const IslandGroup& group);

  long syncs() const { return syncs_; }
  const OuterOptions& options() const { return options_; }
  // The outer state, for checkpoints: the last-sync weights and the momentum.
  Tensor& last_sync() { return last_sync_; }
  Tensor& momentum() { return momentum_; }

 private:
  OuterOptions options_;
  Tensor last_sync_, momentum_;
  Tensor delta_;  // sync()'s buffer: this island's pseudo-gradient, then the islands' sum
  long syncs_ = 0;
};

// One trainer-like island of a one-process simulation: `step` takes one inner step, `params` is
// its flat parameter buffer.
struct SimulatedIsland {
  std::function<void()> step;
  Tensor params;
};

// K islands in one process, one after another: each takes its inner steps from `steps_taken` to
// `steps` (its own data shard: its trainer reads as island i of K), and whenever `outer` is due the
// pseudo-gradients are summed in island order and every island takes the outer step. The real run
// on K processes sums them by a ring all-reduce: for K = 2 that is the same addition, so the
// weights are the same bit for bit.
void train_islands(std::span<SimulatedIsland> islands, std::span<OuterStep> outer, long steps_taken, long steps);

}  // namespace troupe::compute
