#pragma once
// A bench process standing in for a worker actor of a job: an actor system with one blocking
// actor, whose mailbox receives the comm engine's completions (actors/worker/mailbox_comm), a
// progress record, and the group it sums over (data-parallel ranks, or a stage's tensor shards).

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include <caf/all.hpp>

#include "actors/worker/mailbox_comm.hpp"
#include "comm/bootstrap.hpp"
#include "comm/collectives.hpp"
#include "compute/expected.hpp"
#include "compute/model/gpt.hpp"
#include "compute/train/trainer.hpp"
#include "monitor/work_progress.hpp"

namespace troupe::apps {

class BenchRank {
 public:
  // The engine must be connected to every rank of `group`, its own among them.
  static Expected<std::unique_ptr<BenchRank>> join(comm::Engine& engine, comm::Group group);
  // The data-parallel group of ranks 0..processes-1.
  static Expected<std::unique_ptr<BenchRank>> join(comm::Engine& engine, int processes);

  actors::MailboxComm& mailbox() { return mailbox_; }
  monitor::WorkProgress& progress() { return progress_; }
  comm::Communicator& group() { return *group_; }

 private:
  BenchRank();

  std::unique_ptr<caf::actor_system_config> config_;
  std::unique_ptr<caf::actor_system> system_;
  caf::scoped_actor worker_;
  actors::MailboxComm mailbox_;
  monitor::WorkProgress progress_;
  std::unique_ptr<comm::Communicator> group_;
};

// A bench's `ranks` forked ranks (comm::run_local_ranks, placed by `place`), each reporting its
// figures; every rank's result, or an Error where the ranks could not be started.
using RankFigures = std::function<Expected<std::vector<double>>(comm::Engine&)>;
Expected<std::vector<comm::LocalRankResult>> run_bench_ranks(int ranks, const RankFigures& figures,
                                                             const comm::RankPlacement& place = {});

// A bench whose followers 0 … followers − 1 take turns with a lead, rank `followers` (bench cp,
// bench moe): each rank gets a CPU backend of one thread.
using LeadFigures = std::function<std::vector<double>(compute::Backend&)>;
using FollowerFigures = std::function<Expected<std::vector<double>>(comm::Engine&, compute::Backend&)>;
Expected<std::vector<comm::LocalRankResult>> run_lead_and_followers(int followers, const LeadFigures& lead,
                                                                    const FollowerFigures& follow);

// The coefficients of a model with experts' two routing losses (train.moe_aux_coef, moe_z_coef).
struct MoELossCoefficients {
  double aux = 0, z = 0;
};

// A bench rank's trainer options: micro-batch `batch` of whole blocks, a learning rate decaying
// over `steps`, `data_parallel` empty to train alone.
compute::TrainerOptions bench_trainer_options(const compute::GPTConfig& cfg, int batch, int steps,
                                              compute::DataParallel data_parallel, MoELossCoefficients moe = {});

// One bench rank's model and trainer: parameters from seed 1, micro-batch `batch` of whole blocks
// from `stream`, a learning rate decaying over `steps`; `data_parallel` empty to train alone, and
// under `context` shards the rank's rows of each block (its data-parallel group then holds them).
// A model with experts runs its share of them under `experts`, with `moe`'s losses.
class BenchTraining {
 public:
  // The trainer as `options` say (bench_trainer_options, changed by the caller).
  BenchTraining(compute::Backend& backend, const compute::GPTConfig& cfg, compute::TrainerOptions options,
                const std::vector<std::uint16_t>& stream);
  BenchTraining(compute::Backend& backend, const compute::GPTConfig& cfg, int batch, int steps,
                const std::vector<std::uint16_t>& stream, compute::DataParallel data_parallel,
                compute::ContextShardGroup context = {}, compute::ExpertGroup experts = {},
                MoELossCoefficients moe = {});

  // One optimizer step; its wall seconds.
  double timed_step();
  compute::StepResult step() { return trainer_.step(); }
  compute::GPT& model() { return model_; }
  const compute::Trainer& trainer() const { return trainer_; }

 private:
  compute::GPT model_;
  compute::Trainer trainer_;
};

}  // namespace troupe::apps
