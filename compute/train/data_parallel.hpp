#pragma once
// How the ranks of a data-parallel group combine their work: hooks a caller fills with its
// collectives (compute/ knows no communication); the defaults are one process. The replica
// trainer (trainer.hpp) and a pipeline stage both take their step's ZeRO half through them
// (zero_step.hpp). Every rank must start the same buckets and collectives in the same order
// (collectives match by order).

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "compute/tensor.hpp"
#include "compute/train/sharded_parameters.hpp"
#include "compute/train/zero_stage.hpp"

namespace troupe::compute {

struct DataParallel {
  int rank = 0;
  int size = 1;
  ZeroStage zero_stage = ZeroStage::none;
  // A replica's shard of the whole model's flat buffer (ZeRO 1-3): the reduce-scatter's segment.
  std::int64_t shard_begin = 0, shard_end = -1;  // -1: the whole buffer
  // Start summing a slice of the gradients (a bucket: elements [offset, offset + numel) of the
  // group's flat buffer) now; wait_sums() returns once every started bucket is summed. The replica
  // trainer under stage 0 posts each layer as soon as backward has finished it; otherwise each
  // flat buffer is one bucket (zero_step.hpp).
  std::function<void(Tensor bucket, std::int64_t offset)> start_sum;
  std::function<void()> wait_sums;
  // Under expert shards (expert_gradients.hpp): starts summing a bucket of the rank's experts'
  // gradients over the ranks at its place in every expert group, which hold the same experts;
  // wait_sums() waits for it too. Empty where the rank is alone there (one expert group).
  std::function<void(Tensor bucket, std::int64_t offset)> start_expert_sum;
  // Under expert shards with ZeRO 1 to 3: these hooks over the expert data-parallel group (this
  // rank's place in it, its sums, reduce-scatters and gathers; ZeRO-3's unit exchange), which shards
  // the rank's experts' moments (ZeRO-2's gradients, ZeRO-3's parameters) as this group shards the
  // dense ones. Null where the rank is alone there (one expert group).
  std::shared_ptr<const DataParallel> expert_data;
  std::function<void(Tensor& grads)> reduce_scatter_gradients;  // stage 2
  // This rank's segment [first, second) of a buffer of `numel` elements: what reduce_scatter_gradients
  // leaves it summed, and what all_gather_parameters takes from it. Empty: the whole buffer (one rank).
  std::function<std::pair<std::int64_t, std::int64_t>(std::int64_t numel)> segment_of;
  // Every position's segment_of, as n + 1 offsets from 0 to `numel` (what a ZeRO-3 source keeps
  // where, and how a unit's pieces are cut). Empty: one rank.
  std::function<std::vector<std::int64_t>(std::int64_t numel)> shards_of;
  std::function<void(Tensor& params)> all_gather_parameters;    // stages 1, 2
  std::function<double(double)> sum;                            // a scalar over the group (the clip norm's shards)
  std::function<double(double)> mean;                           // a scalar's mean over the group; identity if empty
  // Several scalars summed over the group in one collective, in place (train.balance dynamic: the
  // loss with every replica's time per micro-batch).
  std::function<void(std::span<double> values)> sum_values;
  // Called with the step's index before its gradients are summed (gradient compression starts at
  // a step); may be empty.
  std::function<void(long step)> begin_step;
  // Called before each layer's forward and after each layer's backward, while no gradient is summed
  // and no parameter updated: a rank may give up its step there (by throwing; the caller takes an
  // order to recover) without computing the rest of it. May be empty.
  std::function<void()> between_layers;
  // Called when the rank gives up its step part-way (an in-place recovery): sums it started are
  // never waited for. May be empty.
  std::function<void()> abandon_sums;
  // Training state the gradient sums keep besides model and optimizer (gradient compression's
  // residuals and factors): flat f32 buffers in parameter order, checkpointed as `kind`; a
  // replicated one is the same on every rank of the group. Under expert shards they are in the
  // rank's local layout, each of the dense sums' or of the experts' (the same over the ranks holding
  // them), and the caller maps them to the whole model's order.
  struct SumState {
    std::string kind;
    Tensor values;
    bool replicated = false;
    bool experts = false;
  };
  std::vector<SumState> sum_state;
  // Stage 3: every position's shard as n + 1 offsets into the flat buffer, and how a unit's
  // pieces move; the caller builds the model's source from them and points `sharded` at it.
  std::vector<std::int64_t> shard_offsets;
  ShardExchange unit_exchange;
  ShardedParameters* sharded = nullptr;
};

}  // namespace troupe::compute
