#pragma once
// The ZeRO half of a training step (Rajbhandari et al.; zero_stage.hpp says what each stage
// shards), once for both trainers: over the flat buffers a rank trains — a data-parallel
// replica's whole model (trainer.hpp) or each model chunk of a pipeline stage
// (actors/worker/pipeline_trainer.hpp) — and a data-parallel group's hooks (data_parallel.hpp).
// The trainer runs the forwards and backwards, adds its micro-batches and makes its own sums
// within a replica (a pipeline's tied embedding, its tensor shards'); then:
//   1. sum_gradients: stages 0 and 1 sum each buffer over the group, one bucket each at its
//      offset; stage 2 reduce-scatters it, which leaves this rank's shard summed (the rest is not
//      used); under stage 3 the model kept only its shard, whose source reduce-scattered each
//      unit during the backward: it folds in the last ones.
//   2. the clip: the gradient norm from what this rank holds of the summed gradients
//      (summed_gradients: its shard from stage 2 on, else all of it), group_squares summing the
//      shards' squares over the group; the trainer adds its other groups' (a pipeline's stages
//      and tensor shards), then clip scales what this rank holds.
//   3. update: AdamW on this rank's shard of each buffer (from stage 1 on; the whole buffer under
//      stage 0), keeping moments for that shard alone; stages 1 and 2 then all-gather the updated
//      shards, so every rank holds every parameter again. Stage 3 has nothing to gather.
// Every rank of the group runs the same steps over the same buffers, so the collectives meet in
// order.

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "compute/backend.hpp"
#include "compute/model/parameter_layout.hpp"
#include "compute/optim/adamw.hpp"
#include "compute/train/data_parallel.hpp"

namespace troupe::compute {

class ZeroStep {
 public:
  // A flat buffer as this rank holds it; ranges are offsets into the whole buffer.
  struct Buffer {
    std::span<const ParameterView> views;  // its parameters, for AdamW
    std::int64_t numel = 0;                // of the whole buffer
    // What this rank keeps of the buffer: elements [kept_begin, kept_begin + params.numel()) (all
    // of it, or ZeRO-3's shard).
    Tensor params, grads;
    std::int64_t kept_begin = 0;
    // This rank's shard (stages 1 to 3): the segment the group's reduce-scatter leaves it.
    std::int64_t shard_begin = 0, shard_end = 0;
    ShardedParameters* source = nullptr;  // stage 3: the model's parameter source
    std::int64_t sum_offset = 0;          // where its gradients start in the group's sums
    // The group its sums, shards and gathers go over when not the step's (a rank's experts under
    // expert shards: its expert data-parallel group, expert_gradients.hpp).
    const DataParallel* group = nullptr;
  };

  // `group` must outlive this; its size may change between steps (a job that grew in place).
  ZeroStep(Backend& backend, const DataParallel& group, DType dtype, const AdamWOptions& adamw,
           std::vector<Buffer> buffers);

  // After the step's backwards, their micro-batches added and the sums within a replica made.
  void sum_gradients();
  // Elements [first, second) of buffer b whose summed gradients this rank holds.
  std::pair<std::int64_t, std::int64_t> summed_range(int b) const;
  Tensor summed_gradients(int b) const;
  // `squares` (of what this rank holds of the summed gradients) summed over the step's group where
  // each rank holds a shard; else `squares`. (Under expert shards each rank's expert shards over its
  // expert data-parallel group, summed over the whole group, count every expert once.)
  double group_squares(double squares) const;
  // Scales what this rank holds of the summed gradients by max_norm / norm when the norm of the
  // whole summed gradient exceeds max_norm (> 0).
  void clip(double norm, double max_norm);
  // AdamW on this rank's shard of every buffer, then the gather stages 1 and 2 need.
  void update(double lr);

  ZeroStage stage() const { return group_.zero_stage; }
  int buffers() const { return static_cast<int>(buffers_.size()); }
  const Buffer& buffer(int b) const { return buffers_.at(static_cast<std::size_t>(b)); }
  AdamW& optimizer(int b) { return optimizers_.at(static_cast<std::size_t>(b)); }
  // Continues a run that took `steps` steps: AdamW's bias correction follows from the count.
  void resume_at(long steps);
  // Forgets the step given up part-way: the sums it started and ZeRO-3's gathered units.
  void abandon_step();
  // Frees ZeRO-3's gathered units: after forwards that no backward follows (evaluation).
  void release_gathered();

 private:
  Backend& backend_;
  const DataParallel& group_;
  std::vector<Buffer> buffers_;
  const DataParallel& group_of(const Buffer& b) const { return b.group ? *b.group : group_; }
  std::vector<AdamW> optimizers_;  // one per buffer
};

}  // namespace troupe::compute
