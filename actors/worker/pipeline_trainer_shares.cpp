// train.balance for a replica of pipeline stages or tensor shards: the replicas' measured speeds
// exchanged every step under dynamic shares, and a new share taken at a step boundary
// (docs/balance.md).

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "actors/worker/pipeline_slots.hpp"
#include "actors/worker/pipeline_trainer.hpp"
#include "compute/memory_ledger.hpp"
#include "schedules/checker.hpp"
#include "schedules/generate.hpp"

namespace troupe::actors {

double PipelineTrainer::observe_speeds(compute::StepResult& result) {
  // One slot per (replica, stage, shard), this rank's holding its compute per micro-batch: summed
  // over the dp, pp and tp groups every rank holds every slot, each the one number put there.
  const comm::Grid& grid = setup_.grid;
  const int per_replica = grid.pp * grid.tp;
  compute::Tensor slots =
      compute::Tensor::zeros({static_cast<std::int64_t>(data_replicas_) * per_replica}, compute::DType::f64);
  slots.data_as<double>()[data_replica_ * per_replica + stage_ * grid.tp + shard_] =
      busy_us_ * 1e-6 / setup_.schedule.microbatches;
  for (comm::Communicator* group : {&groups_.dp, &groups_.pp, groups_.tp})
    if (group != nullptr) {
      auto waiting = progress_.wait_for("the replicas' times per micro-batch");
      check_comm(mailbox_.wait(mailbox_.all_reduce(*group, slots)));
    }
  std::vector<double> times(static_cast<std::size_t>(data_replicas_), 0.0);
  for (int r = 0; r < data_replicas_; ++r)
    for (int i = 0; i < per_replica; ++i)
      times[static_cast<std::size_t>(r)] =
          std::max(times[static_cast<std::size_t>(r)], slots.data_as<double>()[r * per_replica + i]);
  result.shares_changed = dynamic_->observe(times);
  return dynamic_->seconds_per_micro_batch()[static_cast<std::size_t>(data_replica_)];
}

void PipelineTrainer::take_shares(const std::vector<int>& shares) {
  const schedules::Schedule& now = setup_.schedule;
  const int micro_batches = shares[static_cast<std::size_t>(data_replica_)];
  auto schedule = schedules::generate_schedule(now.kind, now.stages, micro_batches, now.chunks);
  TROUPE_CHECK(schedule.ok(),
               "a share the schedule cannot run: " + (schedule ? std::string() : schedule.error().message));
  auto report = schedules::check_schedule(*schedule);
  TROUPE_CHECK(report.ok(), report ? std::string() : report.error().message);
  TROUPE_CHECK(schedule->virtual_stages() * micro_batches < gradient_index_bit,
               "too many micro-batches for the tag index");
  setup_.schedule = std::move(*schedule);
  setup_.peak_stashed = report->peak_stashed[static_cast<std::size_t>(stage_)];
  setup_.options.micro_shares = shares;
  const compute::TrainerOptions& o = setup_.options;
  compute::MemoryScope scope(compute::MemoryKind::activations);
  for (Chunk& chunk : chunks_) {
    chunk.stage->reserve(o.batch_size, rows_, setup_.peak_stashed, schedules::splits_backward(setup_.schedule.kind));
    chunk.free_slots = every_slot(setup_.peak_stashed);
    chunk.slot_sends.assign(static_cast<std::size_t>(setup_.peak_stashed), {});
    chunk.micro_batches = std::make_unique<compute::MicroBatchSum>(
        backend_, chunk.stage->grads(), compute::shards_parameters(setup_.zero) ? 1 : micro_batches);
  }
  while (static_cast<int>(inputs_.size()) < micro_batches) {
    inputs_.push_back(compute::Tensor::zeros({o.batch_size, rows_}, compute::DType::i32));
    targets_.push_back(compute::Tensor::zeros({o.batch_size, rows_}, compute::DType::i32));
  }
}

std::vector<double> PipelineTrainer::seconds_per_micro_batch() const {
  return dynamic_ ? dynamic_->seconds_per_micro_batch() : std::vector<double>{};
}

}  // namespace troupe::actors
