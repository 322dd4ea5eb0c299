#pragma once
// A bench process standing in for one pipeline stage of a job: an actor system with one blocking
// actor whose mailbox receives the engine's completions, the stage's dp, pp and embedding groups
// on a grid of 1 × stages × 1, and its PipelineTrainer on `backend`, training micro-batches of
// `batch` whole blocks of bench_tokens (`troupe bench pipeline`, `troupe bench sim-check`).

#include <cstdint>
#include <memory>
#include <vector>

#include <caf/all.hpp>

#include "actors/worker/mailbox_comm.hpp"
#include "actors/worker/pipeline_trainer.hpp"
#include "comm/collectives.hpp"
#include "compute/expected.hpp"
#include "monitor/work_progress.hpp"
#include "schedules/checker.hpp"

namespace troupe::apps {

struct BenchStageShape {
  compute::GPTConfig model;
  int stages = 2;
  int microbatches = 8;
  int batch = 4;  // micro-batch size
  int steps = 4;  // every step the trainer will take, warm-up ones too (the learning rate's horizon)
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
  BenchStage();

  std::unique_ptr<caf::actor_system_config> config_;
  std::unique_ptr<caf::actor_system> system_;
  caf::scoped_actor worker_;
  actors::MailboxComm mailbox_;
  monitor::WorkProgress progress_;
  std::unique_ptr<comm::Communicator> dp_, pp_, embedding_;
  std::vector<std::uint16_t> stream_;
  std::unique_ptr<actors::PipelineTrainer> trainer_;
};

}  // namespace troupe::apps
