#pragma once
// A mixture-of-experts MLP: what a GPT block runs in place of its MLP when the model has experts
// (model.experts E, model.top_k k, model.shared_experts). Each token goes to k of E experts by the
// router (moe_router.hpp); each expert is an MLP of the block's shape (c_fc, GELU, c_proj); the
// token's output is its experts' outputs weighted by the renormalised gates, plus, with a shared
// expert, that expert's output (always on, weight 1):
//
//   out_t = Σ_j g_tj · expert_{e_tj}(x_t) + shared(x_t)
//
// Forward, as numbered steps:
//   1. logits = x · W_routerᵀ (a backend product); route(): probs, gates, the plan, both losses.
//   2. dispatch: copy each token's row to its k slots' rows, grouped by expert.
//   3. per expert e with n_e > 0 rows: hidden = rows · c_fc_eᵀ + b, GELU, out = · c_projᵀ + b —
//      each expert over its own, uneven row count (dropless: no capacity, no padding), all of them
//      in one grouped product of the backend per layer (Backend::grouped_matmul_forward).
//   4. the shared expert's MLP over all N rows, written to out (else out = 0).
//   5. combine: out_t += Σ_j g_tj · expert_out[row of slot (t, j)], j in order.
// Backward walks them in reverse; the router's gradient takes the gates' share and
// aux_scale × d(aux) + z_scale × d(z) (moe_router.hpp). Parameter gradients are accumulated (+=),
// the input gradient written (=), as the backend's conventions say (backend.hpp). It runs as two
// halves, which a zero-bubble pipeline calls apart: every input gradient, with the exchanges
// (moe_backward_input), then every parameter gradient, on the rank alone (moe_backward_weights).
//
// The experts' weights are stacked: c_fc (E, H, C), its bias (E, H), c_proj (E, C, H), its bias
// (E, C), H the block's MLP width (4C), so expert e is one contiguous slice of each and a shard of
// experts a contiguous run. Host memory only (the CPU backend): steps 2 and 5 and the router are
// host loops; the products and the GELU are the backend's.
//
// Under expert parallelism (an ExpertGroup of EP ranks, expert_exchange.hpp) step 3 runs only this
// rank's E/EP experts, over the rows the group routes to them: the slots' rows go to their experts'
// ranks before it and the outputs come back after it. The router, the shared expert, dispatch and
// combine stay on the rank's own tokens. The stacked expert tensors of the weights and gradients
// are then the rank's E/EP experts alone (E/EP, H, C), …: the slices of the whole (E, …) it holds.
//
// Under tensor shards (ExpertGroup's slices) the weights are this slice's, H = GPTConfig::expert_hidden / T, and the
// caller sums `out` and `dinp` over the slices: out is partial (the output biases added by slice 0), the gates'
// gradient is summed over the slices before the router's backward, and the router's share of dinp, the same on every
// slice, is left to slice 0.
//
// Recomputation (compute/model/recompute.hpp) keeps less of a forward:
//   selective  drops the GELU outputs (hidden_gelu, shared_gelu); moe_refill_gelu() makes them
//              again from hidden and shared_hidden before the backward, without any exchange.
//   full       keeps only the routing (plan, counts); the backward first reruns the forward with
//              MoEPass::rerun: the router runs again, since its backward reads the probabilities and
//              gates, and must route every slot as the forward did; the counts are the forward's,
//              not exchanged again; the rows are dispatched and combined again, since the experts'
//              weight gradients read the other ranks' rows and the gates' gradient the outputs.

#include <cstdint>
#include <functional>

#include "compute/backend.hpp"
#include "compute/moe/expert_exchange.hpp"
#include "compute/moe/moe_router.hpp"

namespace troupe::compute {

struct MoEWeights {
  Tensor router;                                                  // (E, C)
  Tensor fc_w, fc_b, proj_w, proj_b;                              // the (rank's) experts, stacked
  Tensor shared_fc_w, shared_fc_b, shared_proj_w, shared_proj_b;  // undefined without one
  bool has_shared() const { return shared_fc_w.defined(); }
};

// What one forward keeps for its backward, for up to `tokens` rows (a prefix is used for fewer).
// A recomputing caller shares the tensors it does not keep between blocks and micro-batches; the
// routing (plan, counts) is each forward's own.
struct MoEActivations {
  Tensor logits, probs, lse, gates;                    // (N, E), (N, E), (N), (N, k)
  Tensor grouped_in, expert_out;                       // (N·k, C) each
  Tensor hidden, hidden_gelu;                          // (R, H): the rows this rank's experts run
  Tensor local_in, local_out, staging;                 // (R, C) each under expert shards
  Tensor shared_hidden, shared_gelu;                   // (N, H) with a shared expert
  RoutingPlan plan;
  ExpertCounts counts;  // under expert shards
};

// The backward's scratch, which every layer and micro-batch may share.
struct MoEScratch {
  Tensor dlogits, dgates;                 // (N, E), (N, k)
  Tensor dexpert_out, dgrouped;           // (N·k, C) each
  Tensor dhidden;                         // (R, H)
  Tensor dlocal, dlocal_in, staging;      // (R, C) each under expert shards
  Tensor dshared_hidden, dpart;           // (N, H) with a shared expert, (N, C)
};

// What the backward's input half keeps for its weight half (moe_backward_input, below): each
// product's output gradient beside the input the forward kept. A zero-bubble pipeline keeps one
// per micro-batch and block (compute/model/gpt_stage.hpp); the whole backward takes its scratch's.
struct MoEWeightInputs {
  Tensor dlogits;               // (N, E): the router logits', the routing losses' share included
  Tensor dexpert_out, dhidden;  // (R, C), (R, H): of the rows this rank's experts ran, grouped by expert
  Tensor dout, dshared_hidden;  // (N, C), (N, H) with a shared expert: its output's and its c_fc output's
  Tensor expert_in;             // (R, C) under a full recompute: the rows the experts ran, as dexpert_out
};

struct MoEShape {
  int experts = 0, top_k = 0;
  bool shared_expert = false;
  std::int64_t C = 0, H = 0;
  int expert_shards = 1;  // EP
  // R, the most rows this rank's experts may run for N tokens: N·k on one rank; under EP ranks
  // each of them sends at most min(k, E/EP) of a token's slots to one rank, so EP·N·min(k, E/EP).
  std::int64_t expert_rows(std::int64_t tokens) const;
};

using MoEAllocate = std::function<Tensor(std::int64_t numel)>;
// Each tensor `shared` defines is taken instead of allocated.
MoEActivations make_moe_activations(const MoEShape& shape, std::int64_t tokens, const MoEAllocate& allocate,
                                    const MoEActivations& shared = {});
// Only the GELU outputs: what a selective recompute shares instead of keeping.
MoEActivations make_moe_gelu_outputs(const MoEShape& shape, std::int64_t tokens, const MoEAllocate& allocate);
MoEScratch make_moe_scratch(const MoEShape& shape, std::int64_t tokens, const MoEAllocate& allocate);
// With `expert_rows`, MoEWeightInputs::expert_in too.
MoEWeightInputs make_moe_weight_inputs(const MoEShape& shape, std::int64_t tokens, const MoEAllocate& allocate,
                                       bool expert_rows);
// Elements of each, as the functions above allocate them (the memory estimate's count).
std::int64_t moe_activation_elements(const MoEShape& shape, std::int64_t tokens);
std::int64_t moe_gelu_elements(const MoEShape& shape, std::int64_t tokens);
std::int64_t moe_scratch_elements(const MoEShape& shape, std::int64_t tokens);
std::int64_t moe_weight_input_elements(const MoEShape& shape, std::int64_t tokens, bool expert_rows);

// A forward's first run, or a full recompute's rerun of it (above).
enum class MoEPass { forward, rerun };

// out (…, C) = the layer of inp (…, C) over its N = numel / C rows; a.plan holds the routing and
// both losses afterwards. A rerun takes a.plan and a.counts as the forward left them.
void moe_forward(Backend& backend, Tensor& out, MoEActivations& a, const Tensor& inp, const MoEWeights& w, int top_k,
                 const ExpertGroup& experts = {}, MoEPass pass = MoEPass::forward);

// hidden_gelu and shared_gelu again from hidden and shared_hidden (H wide), as the forward of
// a.plan wrote them: the same GELU over the same rows, so bit for bit.
void moe_refill_gelu(Backend& backend, MoEActivations& a, std::int64_t H, const ExpertGroup& experts = {});

// dinp = …, grads += …, from dout; aux_scale and z_scale: each loss's coefficient times the loss
// scale the caller's gradient carries. It is moe_backward_input, then moe_backward_weights.
void moe_backward(Backend& backend, Tensor& dinp, MoEWeights& grads, MoEScratch& scratch, const Tensor& dout,
                  const MoEActivations& a, const Tensor& inp, const MoEWeights& w, double aux_scale, double z_scale,
                  const ExpertGroup& experts = {});

// The backward split in two, for zero-bubble pipelines. The input half (B) writes dinp and keeps
// in `keep` what the weight half reads: every product's input gradient is made here, the routing
// losses' gradients join the logits' here, and under expert shards both exchanges of the
// gradients happen here. The weight half (W) adds every parameter gradient (router, experts,
// shared expert) from `kept` and the forward's state, on this rank alone: no exchange, so a
// schedule may place it anywhere before the forward's state is overwritten. A `keep` with
// expert_in also keeps the rows the experts ran (for a W whose forward state was recomputed
// since: moe_rerun_for_weights).
void moe_backward_input(Backend& backend, Tensor& dinp, MoEWeightInputs& keep, MoEScratch& scratch, const Tensor& dout,
                        const MoEActivations& a, const MoEWeights& w, double aux_scale, double z_scale,
                        const ExpertGroup& experts = {});
void moe_backward_weights(Backend& backend, MoEWeights& grads, const MoEWeightInputs& kept, const MoEActivations& a,
                          const Tensor& inp, const ExpertGroup& experts = {});

// What the weight half reads of a forward whose state a full recompute shares: the experts'
// hidden rows from the rows B kept (kept.expert_in), the shared expert's from inp, as the forward
// made them (bit for bit), without any exchange; a.plan and a.counts are the forward's.
void moe_rerun_for_weights(Backend& backend, MoEActivations& a, const MoEWeightInputs& kept, const Tensor& inp,
                           const MoEWeights& w, const ExpertGroup& experts = {});

}  // namespace troupe::compute
