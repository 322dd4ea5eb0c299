#pragma once
// One process's training loop body: batch → forward → backward (accumulated over micro-batches)
// → global-norm clip → AdamW, with the learning rate from the schedule. Which windows a step
// reads is a pure function of (seed, step, micro-batch, row), so a run is bitwise repeatable.
// Printing, timing and validation cadence belong to the caller.
//
// Data parallelism enters through DataParallel: rank r of n reads the global sample indices
// ((step·k + micro)·n + r)·B + [0, B), so the n ranks together read exactly what one process
// with batch n·B reads; each rank scales its loss by 1/(k·n) and sum_gradients adds the ranks'
// gradients, giving every rank the mean gradient before clipping and AdamW. How the sum travels
// (comm/ collectives) is the caller's business: compute/ knows nothing of communication.

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "compute/data/batch.hpp"
#include "compute/data/window_sampler.hpp"
#include "compute/model/gpt.hpp"
#include "compute/model/recompute.hpp"
#include "compute/optim/adamw.hpp"
#include "compute/optim/grad_clip.hpp"
#include "compute/optim/lr_schedule.hpp"
#include "compute/train/micro_batch_sum.hpp"
#include "compute/train/sharded_parameters.hpp"
#include "compute/train/zero_stage.hpp"

namespace troupe::compute {

// How the ranks of a data-parallel group combine their work; the defaults are one process.
//
// Every rank must start the same buckets in the same order (collectives match by order).
//
// ZeRO (Rajbhandari et al.) shards the optimizer over the group: this rank owns
// [shard_begin, shard_end) of the flat parameter buffer and keeps AdamW moments for it alone.
//   stage 0: sum_gradients over the whole buffer; every rank updates everything.
//   stage 1: sum_gradients; each rank updates its shard; all_gather_parameters spreads them.
//   stage 2: reduce_scatter_gradients leaves the summed shard here (the rest is not used); the
//            clip norm is the sum over ranks of each shard's squares; then as stage 1.
//   stage 3: the model keeps only the shard of parameters and gradients (its source is
//            `sharded`, sharded_parameters.hpp), which gathers each block for its use and
//            reduce-scatters its gradients during backward; the clip as stage 2, AdamW on the
//            shard, and nothing to gather after the step.
struct DataParallel {
  int rank = 0;
  int size = 1;
  ZeroStage zero_stage = ZeroStage::none;
  std::int64_t shard_begin = 0, shard_end = -1;  // -1: the whole buffer
  std::function<void(Tensor& grads)> sum_gradients;             // stages 0, 1
  // Stage 0 with overlap: start summing a slice of the gradients (a bucket: elements [offset,
  // offset + numel) of the flat buffer) now; wait_sums() returns once every started bucket is
  // summed. When set, stage 0 uses these instead of sum_gradients: each layer is a bucket, posted
  // as soon as backward has finished it.
  std::function<void(Tensor bucket, std::int64_t offset)> start_sum;
  std::function<void()> wait_sums;
  std::function<void(Tensor& grads)> reduce_scatter_gradients;  // stage 2
  std::function<void(Tensor& params)> all_gather_parameters;    // stages 1, 2
  std::function<double(double)> sum;                            // a scalar over the group (stage 2's norm)
  std::function<double(double)> mean;                           // a scalar's mean over the group; identity if empty
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
  // replicated one is the same on every rank of the group.
  struct SumState {
    std::string kind;
    Tensor values;
    bool replicated = false;
  };
  std::vector<SumState> sum_state;
  // Stage 3: every position's shard as n + 1 offsets into the flat buffer, and how a unit's
  // pieces move; the caller builds the model's source from them and points `sharded` at it.
  std::vector<std::int64_t> shard_offsets;
  ShardExchange unit_exchange;
  ShardedParameters* sharded = nullptr;
};

struct TrainerOptions {
  int batch_size = 8;  // B
  int seq_len = 128;   // T
  // Micro-batches a step sums on this rank, as a data-parallel sum adds ranks' gradients
  // (micro_batch_sum.hpp; not under ZeRO-3, whose shards accumulate as they are reduced).
  int grad_accum = 1;
  LrSchedule lr;
  AdamWOptions adamw;
  double grad_clip = 1.0;  // 0 = off
  std::uint64_t seed = 1337;
  Recompute recompute = Recompute::none;  // what the stages built for these options keep (model/recompute.hpp)
  DataParallel data_parallel;
};

// How a step's global batch is split over the data-parallel group: this rank's place in it, the
// group's size, and the micro-batches of `batch_size` rows each rank sums.
struct BatchSplit {
  int dp_rank = 0;
  int dp_size = 1;
  int grad_accum = 1;
  int batch_size = 8;
};

struct StepResult {
  long step = 0;  // 0-based index of the step just taken
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
};

class Trainer {
 public:
  Trainer(GPT& model, TrainerOptions options, std::span<const std::uint16_t> train_tokens,
          std::span<const std::uint16_t> val_tokens);

  StepResult step();
  // Mean loss over the first `batches` batches of the validation stream (the same at every call).
  double evaluate(int batches);
  long steps_taken() const { return steps_; }
  // Continues a run that took `steps` steps (parameters and moments restored by the caller): the
  // data position, the learning rate and AdamW's bias correction follow from the count.
  void resume_at(long steps);
  // Forgets the step it gave up part-way (an in-place recovery): its started sums and ZeRO-3's
  // gathered units. The next step() starts clean.
  void abandon_step();
  // The job grew in place: from the next step on, the same global batch split as `split` says,
  // the data-parallel sums now over the grown group (the caller renewed it). Every rank holds
  // the whole state, so ZeRO 0 only. Micro-batch i of rank r reads the rows a rank of the other
  // split read, so the weights stay those of a run that had the grown group from the start.
  void resplit(const BatchSplit& split);
  AdamW& optimizer() { return optimizer_; }
  const DataParallel& data_parallel() const { return options_.data_parallel; }
  std::int64_t tokens_per_step() const;  // over the whole data-parallel group
  int seq_len() const { return options_.seq_len; }

 private:
  // Stages 2 and 3's clip: the norm of the summed gradient from the shards, then this shard scaled.
  double clip_sharded_gradients();
  Tensor gradient_shard();

  GPT& model_;
  TrainerOptions options_;
  std::span<const std::uint16_t> train_tokens_, val_tokens_;
  WindowSampler train_sampler_;
  AdamW optimizer_;
  Tensor inputs_, targets_;  // host (B, T) i32
  MicroBatchSum micro_batches_;
  long steps_ = 0;
};

}  // namespace troupe::compute
