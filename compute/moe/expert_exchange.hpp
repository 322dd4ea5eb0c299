#pragma once
// Expert parallelism (model.experts E split over expert.shards EP ranks): rank r of an expert group
// holds experts [r·E/EP, (r + 1)·E/EP) of every MoE block and runs them over the tokens the whole
// group routes to them. The router runs locally on each rank's own tokens; the slots it groups by
// expert (moe_router.hpp) are then grouped by owner too, rank j's experts being a contiguous run.
//
//   1. counts    rank i sends rank j, for each of j's E/EP experts, how many of its rows go there
//                (exchange_counts: one equal all-to-all of E int64 per rank)
//   2. dispatch  the rows, rank j's run to rank j (an uneven all-to-all); the receiver regroups them
//                by its local expert, each expert's rows in source order (rank 0's first, …), so each
//                local expert runs one product over all its rows
//   3. combine   the experts' outputs regrouped by source and sent back (the reverse all-to-all),
//                landing where the sender's slots expect them
//
// The backward sends the outputs' gradients the way of step 2 and the inputs' gradients back the
// way of step 3. Every rank of the group makes the same calls in the same order, one MoE block at a
// time. The exchange is any ContextExchange over the group (compute/context/context_exchange.hpp).

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "compute/context/context_exchange.hpp"
#include "compute/moe/moe_router.hpp"
#include "compute/tensor.hpp"

namespace troupe::compute {

// Where a rank's experts sit: rank() of shards() ranks, each holding `local` experts; one rank
// holding them all without an exchange.
struct ExpertGroup {
  context::ContextExchange* exchange = nullptr;
  // Under context shards, the ranks holding the rest of each micro-batch's tokens: the routing
  // losses add their sums (moe_router.hpp's RoutingSums). Null: the rank's tokens are the whole.
  context::ContextExchange* token_group = nullptr;
  // Under tensor shards (compute/model/tensor_shard.hpp) the rank holds slice `slice` of `slices`
  // of every expert: H/T of its hidden width, c_fc's rows and c_proj's columns, so its experts'
  // outputs are partial sums, which the block sums over the tensor group with its other branches.
  // Every slice routes the same rows alike; `slice_sum` adds a buffer over the slices in place.
  int slice = 0, slices = 1;
  std::function<void(Tensor buffer)> slice_sum;

  bool sharded() const { return exchange != nullptr && exchange->shards() > 1; }
  int shards() const { return sharded() ? exchange->shards() : 1; }
  int rank() const { return sharded() ? exchange->rank() : 0; }
};

// One forward's token counts, kept for its backward: sent[j·L + e] rows this rank sent rank j for
// j's local expert e, received[i·L + e] rows rank i sent this rank for its local expert e (L = E/EP).
struct ExpertCounts {
  int shards = 1, local = 0;
  std::vector<std::int64_t> sent, received;

  std::int64_t received_rows() const;
  // Rows of each local expert over every source (what its product runs on).
  std::vector<std::int64_t> per_local_expert() const;
};

// Step 1 for `plan`'s slots.
ExpertCounts exchange_expert_counts(const ExpertGroup& group, const RoutingPlan& plan);

// Step 2 begun: grouped (plan.slots(), C), the slots grouped by expert, sent to their experts'
// ranks; staging (received_rows, C) receives the rows as they arrive. The caller may compute
// between this and finish_dispatch (moe_layer.hpp runs the shared expert, or the router's
// backward, there), leaving grouped and staging untouched.
void begin_dispatch(const ExpertGroup& group, const ExpertCounts& counts, const Tensor& grouped, Tensor& staging);
// Step 2 ended: waits for the rows, then regroups them from staging into local (received_rows, C)
// by local expert.
void finish_dispatch(const ExpertGroup& group, const ExpertCounts& counts, const Tensor& staging, Tensor& local);
// Step 3: local (received_rows, C) grouped by local expert back to grouped (plan.slots(), C) at
// the senders, through staging (received_rows, C).
void combine_from_experts(const ExpertGroup& group, const ExpertCounts& counts, const Tensor& local, Tensor& staging,
                          Tensor& grouped);

}  // namespace troupe::compute
