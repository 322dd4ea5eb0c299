#pragma once
// What a rank's run drives (training_run.hpp): a replica of the whole model (replica_loop.hpp; one
// process, or a data-parallel rank) or one pipeline stage (pipeline_stage_loop.hpp). Every rank of
// a job calls these in the same order, so the collectives inside them meet.

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/run_checkpoints.hpp"
#include "compute/model/gpt.hpp"
#include "compute/train/trainer.hpp"

namespace troupe::actors {

// Where a rank's state sits in a checkpoint: its rank, the grid, and how many ranks write.
struct CheckpointPlace {
  int rank = 0;
  checkpoint::Grid grid;
  int writers = 1;  // ranks whose held state includes saved ranges
};

class TrainingLoop {
 public:
  virtual ~TrainingLoop() = default;

  virtual compute::StepResult step() = 0;
  // Mean loss over the validation set, `batches` global batches of windows (compute::Trainer::
  // evaluate): the same windows and figure in every layout of one global batch.
  virtual double evaluate(int batches) = 0;
  // Of the whole model: the same digits on every layout of one job.
  virtual double param_norm() = 0;
  virtual std::int64_t tokens_per_step() const = 0;
  // One line for the log: "2 rank(s) x batch 8 x seq 256 x accum 1".
  virtual std::string layout() const = 0;
  // For the closing sample; null when this rank does not hold the whole model.
  virtual compute::GPT* whole_model() { return nullptr; }

  // The state this rank holds, as spans into buffers that live as long as the loop.
  virtual const std::vector<checkpoint::HeldRange>& held() const = 0;
  virtual CheckpointPlace checkpoint_place() const = 0;
  // When held() mirrors device memory in host buffers: fill them before a save, and copy them back
  // after a restore. Nothing to do when held() is the training state itself.
  virtual void mirror_to_host() {}
  virtual void mirror_to_device() {}
  // Continues after `steps` steps, the state restored into held()'s buffers.
  virtual void resume_at(long steps) = 0;
  // Forgets the step it gave up part-way when an in-place recovery ordered it to (collectives
  // started but never waited for); nothing to do where a step keeps nothing across its layers.
  virtual void abandon_step() {}
  // The job grew in place (in_place_recovery.hpp): from the next step on, the global batch split as
  // `split` says. Only a replica's loop is ever asked (recovery_path.hpp's choose_grow).
  virtual void resplit(const compute::BatchSplit&) { TROUPE_CHECK(false, "only a replica's loop grows in place"); }
};

}  // namespace troupe::actors
