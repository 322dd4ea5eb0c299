#pragma once
// One process's training loop body: batch → forward → backward (accumulated over micro-batches)
// → global-norm clip → AdamW, with the learning rate from the schedule. Which windows a step
// reads is a pure function of (seed, step, micro-batch, row), so a run is bitwise repeatable.
// Printing, timing and validation cadence belong to the caller.
//
// Data parallelism enters through DataParallel: rank r of n reads the global sample indices
// ((step·k + micro)·n + r)·B + [0, B), so the n ranks together read exactly what one process
// with batch n·B reads; each rank scales its loss by 1/(k·n) and the group's sums add the ranks'
// gradients, giving every rank the mean gradient before clipping and AdamW. How the sum travels
// (comm/ collectives) is the caller's business: compute/ knows nothing of communication. Under
// ZeRO 0 each layer's sum is posted as soon as backward has finished it; the rest of the step
// (the sums, the clip, AdamW, ZeRO's sharding) is zero_step.hpp's, the whole model one buffer.
//
// Under context shards (the model's context_shard(), C ranks) the C consecutive ranks of the
// group (C·d .. C·d + C − 1) are one data replica: they read replica d's sequences and each runs the
// model on its rows of them. Each scales its loss by 1/(k·n) over the whole group of n ranks, so
// the group's sum is the mean gradient as above (each rank's mean is over its equal share of the
// rows), and the group's mean of the losses is the replicas' mean loss.
//
// Under train.balance static (balance.hpp) data replica r takes micro_shares[r] of the step's
// k·n micro-batches, in the uniform split's global order: micro-batch j of the step reads samples
// (step·k·n + j)·B + [0, B), whichever replica runs it. Each micro-batch's loss is scaled by
// 1/(k·n), as above, so the sum is again the global batch's mean gradient, and the loss returned
// is the group's sum of the micro-batch losses over k·n: the global batch's. Under train.balance
// dynamic (dynamic_shares.hpp) the shares change at step boundaries: each replica times its
// micro-batches' forward and backward (not the wait for the sums), the loss's sum carries every
// replica's time per micro-batch, and every rank takes the same decision from the same numbers.
// A replica of context shards takes its share as one: each of its shards runs its rows of the same
// micro-batches, and the replica's time is its first shard's (its shards wait on each other in
// every attention).
//
// Under expert shards (the model's expert_group(), EP ranks) each rank holds its layout of the
// model (its experts alone): the step's sums and the gradient norm follow expert_gradients.hpp;
// under ZeRO 1 to 3 its dense runs are sharded over the group and its expert runs over the expert
// data-parallel group (ExpertGradients::zero_buffers; under ZeRO-3 the model's source keeps those
// segments and gathers each unit's pieces over the same groups, ExpertGradients::zero3_runs).
//
// Under DiLoCo (outer_step.hpp) the group is one island of `islands`, and island i's replicas read
// the i-th of `islands` equal parts of every global batch: replica d of island i reads as replica
// i·n + d of islands·n would, so the islands together read what plain data parallelism over all
// their replicas reads. Validation stays the island's: each island evaluates the whole set.

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "compute/data/batch.hpp"
#include "compute/data/window_sampler.hpp"
#include "compute/model/gpt.hpp"
#include "compute/model/recompute.hpp"
#include "compute/optim/adamw.hpp"
#include "compute/optim/lr_schedule.hpp"
#include "compute/train/balance.hpp"
#include "compute/train/data_parallel.hpp"
#include "compute/train/dynamic_shares.hpp"
#include "compute/train/expert_gradients.hpp"
#include "compute/train/micro_batch_sum.hpp"
#include "compute/train/zero_step.hpp"

namespace troupe::compute {

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
  // Each MoE block's load-balancing and router z-losses in the objective (GPTStage::set_moe_loss_coefficients).
  double moe_aux_coef = 0, moe_z_coef = 0;
  DataParallel data_parallel;
  int islands = 1;  // DiLoCo's islands K; data_parallel is this rank's island
  int island = 0;   // which of them this rank's is
  // train.balance static: the micro-batches each data replica takes a step, in replica order,
  // summing to grad_accum × the replicas (balance.hpp); empty: grad_accum each.
  std::vector<int> micro_shares;
  // train.balance dynamic: the steps the shares' measurements span (dynamic_shares.hpp), starting
  // from micro_shares; 0 = the shares stay.
  int balance_window = 0;
};

// How a step's global batch is split over the data-parallel group: this rank's place in it, the
// group's size, and the micro-batches of `batch_size` rows each rank sums (grad_accum × dp_size in
// all; under train.balance split by `replica_speeds`, one per replica, empty: even).
struct BatchSplit {
  int dp_rank = 0;
  int dp_size = 1;
  int grad_accum = 1;
  int batch_size = 8;
  std::vector<double> replica_speeds;
};

struct StepResult {
  long step = 0;  // 0-based index of the step just taken
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  // The MoE blocks' mean losses over the step's micro-batches, and their slots summed (this rank's;
  // on a pipeline stage its replica's whole model's, every stage's blocks summed over the pipeline).
  GPTStage::MoERouting moe;
  // On a pipeline stage: its own blocks' share of `moe` (the other stages' slots 0), what the monitor
  // and /metrics add up over ranks, so each token-slot counts once.
  std::optional<GPTStage::MoERouting> moe_of_rank;
  // This data replica's share of the step's global batch (its micro-batches over the step's), and
  // under train.balance dynamic its measured seconds per micro-batch (the window's mean; else 0).
  double batch_share = 0;
  double micro_batch_seconds = 0;
  // train.balance dynamic: the shares change from the next step on (Trainer::micro_shares()).
  bool shares_changed = false;
  // train.balance dynamic after a recovery: this step's shares came from the survivors' measured
  // times, a replacement at their mean (dynamic_shares.hpp).
  bool shares_resumed = false;
  // train.sync diloco, filled by the caller that takes the outer step (the trainer knows no
  // islands): the islands in the last sync (0: not diloco), the fragment syncs landed since the
  // process started, the bytes this rank sent for the newest, and the step after which the next
  // starts (0: none).
  int islands = 0;
  long outer_syncs = 0;
  std::int64_t outer_bytes = 0;
  long next_sync_step = 0;
};

class Trainer {
 public:
  Trainer(GPT& model, TrainerOptions options, std::span<const std::uint16_t> train_tokens,
          std::span<const std::uint16_t> val_tokens);

  StepResult step();
  // Mean loss over the validation set: the first `batches` global batches of windows of the
  // validation stream (batches · tokens_per_step() / T windows, the same at every call and in
  // every split of one global batch). Rank r of n evaluates the r-th of n equal parts, in
  // micro-batches of B, and the group's mean makes the set's: every rank of the group calls it.
  double evaluate(int batches);
  long steps_taken() const { return steps_; }
  // Continues a run that took `steps` steps (parameters and moments restored by the caller): the
  // data position, the learning rate and AdamW's bias correction follow from the count. Under
  // train.balance dynamic the next step first agrees on the shares over the group, so every rank of
  // the group calls it (a recovery's survivors and replacements, a resumed job's ranks).
  void resume_at(long steps);
  // Forgets the step it gave up part-way (an in-place recovery): its started sums and ZeRO-3's
  // gathered units. The next step() starts clean.
  void abandon_step();
  // The job grew in place: from the next step on, the same global batch split as `split` says,
  // the data-parallel sums now over the grown group (the caller renewed it). Every rank holds
  // the whole state, so ZeRO 0 only. Micro-batch i of rank r reads the rows a rank of the other
  // split read, so the weights stay those of a run that had the grown group from the start.
  // Under uneven shares they are split again by the split's speeds; under train.balance dynamic
  // the next step then agrees on them as after a recovery (the survivors' measured speeds, a grown
  // replica at their mean), so every rank of the grown group calls resume_at before it.
  void resplit(const BatchSplit& split);
  AdamW& optimizer() { return zero_.optimizer(0); }
  // The step's ZeRO buffers and their optimizers: one (the whole model), or under expert shards
  // with ZeRO 1 to 3 one a run of a kind (expert_gradients.hpp).
  ZeroStep& zero_step() { return zero_; }
  const DataParallel& data_parallel() const { return options_.data_parallel; }
  const std::vector<int>& micro_shares() const { return options_.micro_shares; }
  // train.balance dynamic: each replica's measured seconds per micro-batch (dynamic_shares.hpp);
  // empty otherwise or before the first step.
  std::vector<double> seconds_per_micro_batch() const;
  std::int64_t tokens_per_step() const;  // over the whole data-parallel group, every island's
  int seq_len() const { return options_.seq_len; }

 private:
  GPT& model_;
  TrainerOptions options_;
  std::span<const std::uint16_t> train_tokens_, val_tokens_;
  WindowSampler train_sampler_;
  ExpertGradients experts_;  // which elements are summed over which group
  // The group a rank's experts are sharded over under ZeRO 1 to 3 where it is alone there.
  DataParallel lone_experts_;
  ZeroStep zero_;  // over options_.data_parallel
  std::vector<ZeroStep::Buffer> zero_buffers();
  // The squares of the whole model's summed gradient, from what this rank holds of it.
  double gradient_squares() const;
  Tensor inputs_, targets_;       // host (pass_sequences(), T) i32
  Tensor rows_in_, rows_target_;  // under context shards: this rank's rows of them, (pass_sequences(), T / C)
  // Under ZeRO-3 with uneven shares a replica runs its share's micro-batches as one batch (step());
  // the most sequences a forward then takes: the largest share's (dynamic: the largest possible).
  bool share_in_one_pass() const;
  int pass_sequences() const;
  // The rank's data replica and their count: the group's ranks, or its context groups.
  int data_rank() const;
  int data_replicas() const;
  // Whether this rank's time per micro-batch stands for its replica's under train.balance dynamic:
  // every rank's, or under context shards the replica's first shard's.
  bool times_replica() const;
  // The first `sequences` of the batch as this rank's model runs on them: those rows whole, or
  // under context shards its rows of them.
  Tensor own_rows(const Tensor& batch, int sequences, Tensor& rows) const;
  // The micro-batches this rank sums a step, and the first sample of its micro-batch `micro`.
  int own_micro_batches() const;
  std::uint64_t first_sample(int micro) const;
  // The micro-batches this rank may sum in one step: its share, or under train.balance dynamic the
  // most a share can become (every micro-batch but one each for the others).
  int micro_batch_capacity() const;
  MicroBatchSum micro_batches_;
  std::optional<DynamicShares> dynamic_;  // train.balance dynamic
  // The step's loss sum over the group, and under dynamic shares every replica's seconds per
  // micro-batch with it (this replica's `seconds`): the shares for the next step decided.
  double sum_loss(double loss_sum, double seconds, StepResult& result);
  // After resume_at under dynamic shares: every replica's measured time over the group, the shares
  // resumed from them (DynamicShares::resume); true when some replica was measured.
  bool resume_shares();
  bool resume_shares_ = false;
  long steps_ = 0;
};

}  // namespace troupe::compute
