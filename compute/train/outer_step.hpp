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
// over the islands (IslandGroup). Host memory, f32 or f64.
//
// Streaming (outer_fragments.hpp): each fragment of the buffer takes the step above on its own
// slice of w_sync and m, on its own schedule. With an overlap of d steps a fragment's sum is
// started after its sync step s and applied after step s + d, the inner steps going on meanwhile;
// the fragment's weights are then the mix of Streaming DiLoCo, α·w_local + (1 − α)·w with α = ½,
// the local weights having moved d steps since the pseudo-gradient was taken (w_sync is w).
//
//     after step s:  land   every fragment whose sum started d steps ago (or any, at the last step)
//                    start  every fragment scheduled at s (every one not just landed, at the last
//                           step), landing at once when d = 0 or s is the last step
//
// The pseudo-gradients travel in f32, or in bf16 (OuterPrecision::bf16): each island's rounded to
// nearest even, and each partial sum rounded again, as the bf16 ring all-reduce adds them; or as
// int8 blocks (OuterPrecision::int8, int8_blocks.hpp): each island's encoded, and the decoded
// payloads added in island order, as every rank adds the gathered payloads.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "compute/tensor.hpp"
#include "compute/train/outer_fragments.hpp"
#include "compute/train/sync_mode.hpp"

namespace troupe::compute {

struct OuterOptions {
  long every = 20;        // H: inner steps between syncs (train.diloco_steps)
  double lr = 0.7;        // train.outer_lr
  double momentum = 0.9;  // train.outer_momentum (Nesterov)
  OuterPrecision precision = OuterPrecision::f32;  // train.diloco_precision
  std::vector<OuterFragment> fragments;            // train.diloco_fragments (outer_fragments); empty: the whole buffer
  long overlap = 0;  // d: steps between a fragment's sum started and applied (train.diloco_overlap)
};

// A rank's place among the islands: `count` K, its island `index`, and the sum of a pseudo-gradient
// over the K ranks that hold this rank's place in every island, in place, at the job's precision:
// `start_sum` posts one (taken after the step that made `steps_taken` steps), `wait_sum` waits for the oldest not yet
// waited for and returns how many islands it summed (K, or fewer where islands were left out of it: the outer step
// divides by that count); neither is called for one island, which sends nothing. `synced`, when set, is told by
// after_step, once fragments landed, the steps taken and the new outer state (the last-sync weights
// and the momentum): where a lost island rejoins, a rank hands it that state there.
struct IslandGroup {
  int count = 1;
  int index = 0;
  std::function<void(Tensor, long steps_taken)> start_sum;
  std::function<int()> wait_sum;
  std::function<void(long steps_taken, const Tensor& last_sync, const Tensor& momentum)> synced;
  // Where the island's ranks agree on what their sums held (an island of several ranks that the
  // job leaves out when lost): called once for each fragment of the model that lands, after every
  // run of it this rank sums was waited for (none where it holds none of it, or only empty runs);
  // returns the islands they all summed over. Unset: the sums' own count.
  std::function<int()> agree;
  // Where set, called by after_step after every step before its outer work (a rank takes the job's
  // orders on lost islands there, island_membership.hpp).
  std::function<void()> between_steps;
};

class OuterStep {
 public:
  // The weights at the last sync start as `params` (copied); the momentum at zero.
  OuterStep(const Tensor& params, OuterOptions options);

  // The fragments whose sum lands (is applied) after the step that made `steps_taken` of
  // `total_steps` steps, then those whose sync starts after it, as the header's schedule has it.
  std::vector<int> landing(long steps_taken, long total_steps) const;
  std::vector<int> starting(long steps_taken, long total_steps) const;
  // Whether a sync started after that step lands at once.
  bool lands_at_once(long steps_taken, long total_steps) const;
  // The step after which the next sync starts once `steps_taken` steps are taken (a fragment's
  // scheduled step, or the last); 0 when the run has taken all of its steps.
  long next_sync(long steps_taken, long total_steps) const;

  // Fragment f's pseudo-gradient from `params` into pending(f): the last-sync weights less them;
  // its sum starts after the step that made `steps_taken` steps.
  void take_pseudo_gradient(int fragment, const Tensor& params, long steps_taken);
  // Fragment f's pseudo-gradient, then the islands' sum of them (fragment-sized, a slice of one buffer).
  Tensor pending(int fragment) const;
  // The Nesterov step above for fragment f from `summed`, the K islands' pseudo-gradients summed
  // (f's size), into `params` (mixed with them when the sum was started before this step); the
  // result becomes f's last-sync weights.
  void apply(int fragment, Tensor& params, const Tensor& summed, int islands, bool mix);

  // One rank's outer work after the step that made `steps_taken` steps: lands and starts the
  // fragments the schedule names, summing over `group`. The fragments landed, in order.
  std::vector<int> after_step(long steps_taken, long total_steps, Tensor& params, const IslandGroup& group);

  // An island that missed fragment f's sync (lost, or silent): it takes f's outer state from
  // `peer`, an island that took the step, and its weights of f become the outer weights, so it goes
  // on as the islands present do. Its sum in flight, if any, is dropped.
  void adopt(int fragment, const OuterStep& peer, Tensor& params);

  // Waits for and applies every fragment's sum in flight now, as the last step would land it
  // (for a caller that stops stepping for a while, such as a bench taking turns). The fragments landed.
  std::vector<int> land_in_flight(Tensor& params, const IslandGroup& group);

  long syncs() const { return syncs_; }  // fragment syncs landed, all fragments together
  // The islands the newest sync that landed averaged over (fewer than K where some were left out).
  int last_islands() const { return last_islands_; }
  const OuterOptions& options() const { return options_; }
  const std::vector<OuterFragment>& fragments() const { return options_.fragments; }
  // The outer state, for checkpoints: the last-sync weights and the momentum.
  Tensor& last_sync() { return last_sync_; }
  Tensor& momentum() { return momentum_; }

 private:
  // Whether fragment f's pseudo-gradient is summed over the islands (not for one island, nor an
  // empty fragment); land waits for that sum, if any, and applies it.
  bool sums(int fragment, const IslandGroup& group) const;
  // Waits for the sums of `runs` (one fragment of the model: runs with the same
  // OuterFragment::fragment), agrees on their count where the group does, and applies each.
  void land(const std::vector<int>& runs, Tensor& params, const IslandGroup& group, bool mix);
  // `runs` grouped by the model fragment each is part of, in the order each fragment first appears.
  std::vector<std::vector<int>> by_fragment(const std::vector<int>& runs) const;

  OuterOptions options_;
  Tensor last_sync_, momentum_;
  Tensor delta_;                  // each fragment's pseudo-gradient, then its islands' sum, in its slice
  std::vector<long> started_at_;  // the step after which each fragment's sum started; -1: none in flight
  long syncs_ = 0;
  int last_islands_ = 0;
};

// One trainer-like island of a one-process simulation: `step` takes one inner step, `params` is
// its flat parameter buffer. `restart_inner`, when set, is called once the island adopted the
// outer state after a sync it missed: a lost island's new process starts its inner optimizer afresh
// (AdamW's moments zero), which the caller's trainer then does; unset, its moments stay its own.
struct SimulatedIsland {
  std::function<void()> step;
  Tensor params;
  std::function<void()> restart_inner;
};

// Whether island `island` takes part in the syncs that land after the step that made
// `steps_taken` steps; empty: every island always.
using IslandsPresent = std::function<bool(long steps_taken, int island)>;

// K islands in one process, one after another: each takes its inner steps from `steps_taken` to
// `steps` (its own data shard: its trainer reads as island i of K), and whenever fragments land the
// pseudo-gradients are summed in island order (rounded as the precision's wire rounds them, for K
// above 1) and every island takes the outer step. The real run on K processes sums them by a ring
// all-reduce: for K = 2 that is the same addition, so the weights are the same bit for bit.
//
// With `present`, a sync averages over the islands present only, Δ = (Σ_{i present} Δ_i) / |present|
// (summed in island order, as the outer group of the present islands would), and each island absent
// then adopts the whole outer state of the first present, every fragment's (OuterStep::adopt of
// each), as a lost island's new process takes it. At least one must be present.
void train_islands(std::span<SimulatedIsland> islands, std::span<OuterStep> outer, long steps_taken, long steps,
                   const IslandsPresent& present = {});

}  // namespace troupe::compute
