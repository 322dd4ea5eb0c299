#pragma once
// The router of a mixture-of-experts MLP (moe_layer.hpp): which k of the E experts each token goes
// to, with which gates, and the two losses that keep the routing healthy. It works on host memory
// (the CPU backend's tensors), f32 or f64, summing in double.
//
//   logits (N,E) = x · W_routerᵀ           the product is the layer's (moe_layer.cpp)
//   p_t = softmax(logits_t),  lse_t = log Σ_i exp(logits_ti)
//   top-k                                  the k largest p_ti of each token, in descending order,
//                                          ties to the lower expert index
//   gates g_tj = p_{t,e_j} / Σ_j' p_{t,e_j'}  the k gates renormalised to sum to 1
//   load-balancing loss (Switch, GShard)   aux = E · Σ_i f_i · P_i: f_i the share of the N·k
//                                          token-slots routed to expert i (a count, no gradient),
//                                          P_i the mean over tokens of p_ti; 1 when balanced
//   router z-loss (ST-MoE)                 z = mean over tokens of lse_t²
//
// Under context shards a micro-batch's tokens are spread over the ranks of its context group: f_i,
// P_i and z are the micro-batch's, from every rank's sums (RoutingSums, added over the group), so
// each rank's plan holds the one-process losses, and its backward the one-process f_i.
//
// Dispatch is dropless: slot t·k + j (token t's j-th choice) goes to its expert whatever the load,
// and the N·k slots are grouped by expert (expert 0's first, in token order, then expert 1's, ...),
// so each expert's rows are one contiguous run of its own, uneven length; an expert may get none.

#include <cstdint>
#include <span>
#include <vector>

#include "compute/check.hpp"
#include "compute/tensor.hpp"

namespace troupe::compute {

struct RoutingPlan {
  std::int64_t tokens = 0;
  int experts = 0, top_k = 0;
  std::vector<int> expert;            // (N·k) slot t·k + j → its expert
  std::vector<std::int64_t> row;      // (N·k) slot → its row in the grouped buffers
  std::vector<std::int64_t> offsets;  // (E + 1) expert e's rows are [offsets[e], offsets[e + 1])
  double aux_loss = 0, z_loss = 0;    // of the latest route(), or of its group (set_losses)
  std::vector<double> load;           // (E) f_i, as aux_loss counts it

  std::int64_t slots() const { return tokens * top_k; }
  std::int64_t count(int e) const { return offsets[e + 1] - offsets[e]; }
};

// What the losses are made of, summed over tokens: (E) slots routed to each expert, (E) each
// expert's probabilities, Σ lse², and the tokens. Laid out flat as 2E + 2 doubles (flat()) for a
// group's sum, counts exact in a double.
struct RoutingSums {
  std::vector<double> slots, probs;
  double lse_squares = 0, tokens = 0;

  std::vector<double> flat() const;
  static RoutingSums from_flat(std::span<const double> values, int experts);
};

// From logits (N,E): probs (N,E), lse (N), gates (N,k) in the logits' dtype, and the plan with
// both losses over these N tokens; returns their sums. probs, lse and gates may be larger buffers:
// their prefixes are written.
RoutingSums route(RoutingPlan& plan, Tensor& probs, Tensor& lse, Tensor& gates, const Tensor& logits, int top_k);
// The plan's losses and load from `sums` (a group's: the micro-batch's tokens on every rank).
void set_losses(RoutingPlan& plan, const RoutingSums& sums);

// dlogits (N,E) = d(loss)/d(logits), written: from dgates (N,k), the loss's gradient with respect
// to each slot's gate, plus aux_scale × d(aux) and z_scale × d(z) (each loss's coefficient times
// the caller's loss scale). Its means are over the plan's N tokens, with the plan's load: under
// context shards the caller's loss scale weighs the rank's N as one of C equal parts.
void route_backward(Tensor& dlogits, const Tensor& dgates, const Tensor& probs, const Tensor& lse,
                    const RoutingPlan& plan, double aux_scale, double z_scale);

// fn(Real{}) with Real float for f32 and double for f64: the MoE files' host loops.
template <typename Fn>
void with_moe_real(DType dtype, Fn&& fn) {
  TROUPE_CHECK(dtype == DType::f32 || dtype == DType::f64, "the MoE layer runs in f32 or f64");
  if (dtype == DType::f32)
    fn(float{});
  else
    fn(double{});
}

}  // namespace troupe::compute
