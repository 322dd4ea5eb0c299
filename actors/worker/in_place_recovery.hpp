#pragma once
// A worker's part in an in-place recovery (docs/drills.md, "In-place recovery"), run in the worker
// actor's own thread. The job supervisor coordinates it with the messages of messages.hpp:
//
//   survivor     a recover_msg ends the wait in its step (RecoveryOrdered): it abandons the step's
//                sends, receives and collectives and renews every group it sums over (data
//                parallel, and with pipeline stages or tensor shards the pipeline, tensor-shard
//                and tied-embedding groups and the stage's point-to-point keys) under the order's
//                epoch (comm/grid.hpp's epoch_group_id), so no late message of the abandoned step
//                matches a new one; its state is that after its last completed step (a step's
//                update comes only after its last collective). recover_ready_msg{steps done}.
//   replacement  respawned by its node supervisor with the order (in its process, or in a node
//                process started again, which connects to every peer first); its groups are made
//                under the epoch's ids. recover_ready_msg{−1}.
//   survivor of  a lost or silent node's process was started again: the plan names its ranks'
//   a lost node  new addresses, and every survivor connects to them afresh first (the engine
//                replaces the failed endpoint and maps the new process's lent region).
//   grow         a recover_msg with grown_world names no failed rank but the ranks of nodes that
//                join the running job (recovery_path.hpp's choose_grow: plain data parallelism):
//                each survivor grows its engine's world, renews its data-parallel group over every
//                rank of the grown world and splits the global batch anew (TrainingLoop::resplit);
//                the new ranks start as replacements do, and receive their state as below.
//   everyone     the job's recover_plan_msg pairs each receiver (fewer steps done than the plan's)
//                with a donor of its own (pipeline stage, tensor shard) in another data-parallel
//                replica: the donor sends its parameters and AdamW moments to each of its
//                receivers over the comm engine, point-to-point under state_transfer_group_id's
//                epoch id, index = the held range's position; every rank goes on after the plan's
//                steps (the data position is a function of the step) and reports recover_done_msg.
//   rollback     where no replica holds some rank's state (recovery_path.hpp), every rank reported
//                the newest checkpoint it can read with its readiness, and the plan says
//                `rollback`: no donors, every rank (survivors in their own processes included)
//                loads its own shards of checkpoint `steps` with the run's restore code
//                (checkpoint::RunCheckpoints::roll_back_to: parameters, AdamW moments; the data
//                position and the learning-rate schedule are functions of the step) and goes on
//                after it; the steps since are trained again.
//
// A stop while it waits ends the worker (WorkStopped), as in any other wait.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "actors/worker/mailbox_comm.hpp"
#include "actors/worker/training_loop.hpp"
#include "comm/collectives.hpp"
#include "comm/engine.hpp"
#include "compute/expected.hpp"

namespace troupe::actors {

// How a rank's recovery went: the step everyone goes on after, who gave the state, and what this
// rank moved over the data plane (bytes sent or received, and how long that took).
struct RecoveryResult {
  std::int64_t steps = 0;
  int donor = -1;
  bool received = false;
  std::int64_t bytes = 0;  // a rollback: read from this rank's shards of the checkpoint
  double seconds = 0;
  std::string checkpoint;  // a rollback: the folder every rank went back to; empty otherwise
  bool rejoined_island = false;  // DiLoCo: the outer state alone, a lost island rejoining (island_membership.hpp)
};

// How a rank rolls back to a checkpoint (the run's checkpoints, training_run.cpp): `newest`, the
// step of the newest committed checkpoint it can read (−1: none, or no checkpoint.dir); `load`
// fills the loop's held state from checkpoint `steps` and returns its folder.
struct CheckpointRollback {
  std::function<std::int64_t()> newest;
  std::function<Expected<std::string>(std::int64_t steps)> load;
};

// A communicator the rank sums over and its axis's id (comm/grid.hpp): each recovery renews it
// under the epoch's id for that axis.
struct RenewedGroup {
  comm::Communicator* communicator;
  std::uint16_t axis_id;
};

class InPlaceRecovery {
 public:
  // `groups`: every communicator of the rank's step. `renew_step`: what else of the step the rank
  // forgets and renews under an epoch (a pipeline stage's, PipelineTrainer::renew); may be empty.
  InPlaceRecovery(caf::blocking_actor* worker, MailboxComm& mailbox, comm::Engine& engine,
                  std::vector<RenewedGroup> groups, std::function<void(int epoch)> renew_step = {})
      : worker_(worker),
        mailbox_(mailbox),
        engine_(engine),
        groups_(std::move(groups)),
        renew_step_(std::move(renew_step)) {}

  // A survivor after RecoveryOrdered, holding `loop`'s state after `steps_done` steps.
  RecoveryResult survive(const recover_msg& order, std::int64_t steps_done, TrainingLoop& loop,
                         const CheckpointRollback& rollback);
  // A replacement, before its first step (its group already under the order's epoch).
  RecoveryResult join(const recover_msg& order, TrainingLoop& loop, const CheckpointRollback& rollback);

 private:
  RecoveryResult take_part(const recover_msg& order, std::int64_t steps_done, TrainingLoop& loop,
                           const CheckpointRollback& rollback);
  // Moves the plan's state over the data plane: this rank's to its receivers, or its donor's to it.
  // The error, or "".
  std::string move_state(const recover_plan_msg& plan, const recover_msg& order, TrainingLoop& loop,
                         RecoveryResult& result);
  // Connects this rank afresh to the ranks of the plan's replaced node processes that are its
  // partners in the renewed groups, and introduces the others (connected on first use), unless it
  // is one of them; the error, or "".
  std::string connect_replaced(const recover_plan_msg& plan, int rank);

  caf::blocking_actor* worker_;
  MailboxComm& mailbox_;
  comm::Engine& engine_;
  std::vector<RenewedGroup> groups_;
  std::function<void(int epoch)> renew_step_;
};

}  // namespace troupe::actors
