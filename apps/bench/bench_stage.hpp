#pragma once
// A bench process standing in for one pipeline stage of a job: a BenchRank (an actor system with one
// blocking actor whose mailbox receives the engine's completions) on the stage's dp group, its pp and embedding groups
// on a grid of 1 × stages × 1, and its PipelineTrainer on `backend`, training micro-batches of
// `batch` whole blocks of bench_tokens (`troupe bench pipeline`, `troupe bench sim-check`).

#include <cstdint>
#include <memory>
#include <vector>

#include "actors/worker/pipeline_trainer.hpp"
#include "apps/bench/bench_rank.hpp"
#include "comm/collectives.hpp"
#include "compute/expected.hpp"
#include "compute/model/stage_split.hpp"
#include "schedules/checker.hpp"

namespace troupe::apps {

struct BenchStageShape {
  compute::GPTConfig model;
  int stages = 2;
  int microbatches = 8;
  int batch = 4;  // micro-batch size
  int steps = 4;  // every step the trainer will take, warm-up ones too (the learning rate's horizon)
  std::vector<compute::StageLayers> split;  // the stages' layers; empty: the balanced split for the schedule
};

class BenchStage {
 public:
  // The engine must be connected to every rank of the grid; rank = stage.
  static Expected<std::unique_ptr<BenchStage>> create(comm::Engine& engine, compute::Backend& backend,
                                                      const BenchStageShape& shape, const schedules::Schedule& schedule,
                                                      const schedules::CheckReport& check);

  actors::PipelineTrainer& trainer() { return *trainer_; }
  // One step; its wall seconds.
  double timed_step();

 private:
  BenchStage() = default;

  std::unique_ptr<BenchRank> rank_;  // its group: the stage's dp group
  std::unique_ptr<comm::Communicator> pp_, embedding_;
  std::vector<std::uint16_t> stream_;
  std::unique_ptr<actors::PipelineTrainer> trainer_;
};

}  // namespace troupe::apps
