#pragma once
// A rank that runs the whole model: `troupe train` in one process, or a data-parallel replica
// whose gradients `data_parallel`'s hooks sum (ZeRO 1/2 shard the optimizer state over them; ZeRO-3
// the parameters too, which the model then gathers block by block). Under train.sync diloco the
// group is the rank's island, and every train.diloco_steps steps (and after the last) the islands
// take the outer step (compute/train/outer_step.hpp); its state is checkpointed as `outer_sync` and
// `outer_momentum`, and with a trace (pipeline.trace) each step and each fragment's sync is
// recorded in it (docs/formats/chrome-trace.md, "What DiLoCo records").

#include <functional>
#include <memory>
#include <vector>

#include "actors/job_options.hpp"
#include "actors/worker/job_data.hpp"
#include "actors/worker/outer_syncs.hpp"
#include "actors/worker/training_loop.hpp"
#include "compute/backend.hpp"
#include "compute/moe/expert_exchange.hpp"
#include "monitor/metrics.hpp"
#include "monitor/trace.hpp"

namespace troupe::actors {

// The job's TrainerOptions (batch, sequence, schedule, AdamW, clip, seed; one process).
compute::TrainerOptions trainer_options(const ResolvedJob& job);
// train.balance static: the micro-batches each of `replicas` data replicas takes a step, by their
// speeds (even when none are given); dynamic's first shares alike; empty under none. Under DiLoCo
// each island splits its own step: `replicas` are island `island`'s, its slice of the job's speeds.
std::vector<int> micro_shares(const ResolvedJob& job, int replicas, int island = 0);
// The layout's text for uneven `shares` ("replica shares 6, 2 of 8 micro-batches"; empty when there
// are none), logged once by rank 0 as "balance static: …".
std::string announce_shares(const ResolvedJob& job, const std::vector<int>& shares, int rank);
// train.balance dynamic's change after `result`'s step, logged by rank 0 with the times it was
// decided from: "balance dynamic: step 23: replica shares 5, 3 of 8 micro-batches (times per
// micro-batch 0.210 s, 0.400 s)".
void log_share_change(const compute::StepResult& result, const std::vector<int>& shares,
                      const std::vector<double>& seconds_per_micro_batch);

class ReplicaLoop final : public TrainingLoop {
 public:
  // `initialise`: fill the parameters from the seed; a replacement joining in place skips it (a
  // peer's state overwrites them before the first step, and for `small` it would cost half a second).
  ReplicaLoop(const ResolvedJob& job, compute::Backend& backend, const JobData& data,
              compute::DataParallel data_parallel, bool initialise = true, compute::ContextShardGroup context = {},
              compute::IslandGroup islands = {}, compute::ExpertGroup experts = {},
              monitor::WorkerMetrics* metrics = nullptr);

  compute::StepResult step() override;
  double evaluate(int batches) override { return trainer_.evaluate(batches); }
  double param_norm() override;
  std::int64_t tokens_per_step() const override { return trainer_.tokens_per_step(); }
  std::string layout() const override { return layout_; }
  // None under ZeRO-3 (the rank keeps a shard), context shards (the model runs on some rows) or
  // expert shards (its MoE blocks need the expert group).
  compute::GPT* whole_model() override {
    const compute::GPTStage& stage = model_.stage();
    return sharded_ || stage.context_shard().sharded() || stage.expert_group().sharded() ? nullptr : &model_;
  }
  const std::vector<checkpoint::HeldRange>& held() const override { return held_; }
  CheckpointPlace checkpoint_place() const override { return place_; }
  void mirror_to_host() override;
  void mirror_to_device() override;
  void resume_at(long steps) override { trainer_.resume_at(steps); }
  void abandon_step() override { trainer_.abandon_step(); }
  void resplit(const compute::BatchSplit& split) override;
  // train.sync diloco: records every step and every fragment's outer sync into `recorder` from now
  // on, on this rank's two tracks.
  void record_into(monitor::TraceRecorder& recorder);

 private:
  compute::Backend& backend_;
  // Before the trainer, which takes the data-parallel group.
  CheckpointPlace place_;
  bool moments_sharded_;  // ZeRO: each rank holds and writes its own shard of the moments
  std::function<double(double)> sum_over_group_;  // a scalar summed over the data-parallel group
  std::unique_ptr<compute::ShardedParameters> sharded_;  // ZeRO-3: the model's parameters, sharded
  compute::GPT model_;
  compute::Trainer trainer_;
  int island_;                         // DiLoCo's island of this rank; 0 otherwise
  std::unique_ptr<OuterSyncs> outer_;  // train.sync diloco only
  monitor::WorkerMetrics* metrics_;
  monitor::TraceRecorder* trace_ = nullptr;  // the steps are recorded here; null: none
  std::string layout_;
  // Parameters and both moments; checkpoints read and write host memory, so state on a device
  // goes through host mirrors (on the CPU the mirrors are views of the state itself).
  std::vector<compute::Tensor*> state_;
  std::vector<compute::Tensor> mirrors_;
  std::vector<checkpoint::HeldRange> held_;
  // Under expert shards with PowerSGD: zeros, this rank's residuals of the experts it does not hold.
  compute::Tensor other_experts_state_;
};

}  // namespace troupe::actors
