#pragma once
// What the job's recovery decisions read of a job (supervision/recovery_path.hpp), derived once
// from the resolved job by recovery_shape() and carried in the job supervisor's plan and in every
// start_msg: a node process acts on the job's policy as the job decided it, without reading a
// config string again.

#include <cstdint>

#include <caf/meta/type_name.hpp>

#include "actors/job_options.hpp"
#include "comm/compression.hpp"
#include "compute/train/zero_stage.hpp"

namespace troupe::actors {

struct RecoveryShape {
  RecoveryMode mode = RecoveryMode::restart;  // fault.recovery
  int data_parallel = 1;
  int pipeline_stages = 1;
  int tensor_shards = 1;
  compute::ZeroStage zero = compute::ZeroStage::none;  // train.zero
  bool device_backend = false;  // train.backend cuda or cuda-bf16: the state is in device memory
  comm::Compression compression = comm::Compression::none;  // comm.compress
  // Whether the job can start a lost node process again: its launcher started every node, on this
  // machine or through the launcher template (not --external).
  bool replaces_nodes = false;
  // checkpoint.dir is set: a restart or a rollback has checkpoints to read.
  bool checkpoints = false;
  // DiLoCo's islands (train.islands under train.sync diloco; 1 otherwise): each trains weights of
  // its own between outer syncs.
  int islands = 1;
  // Streaming DiLoCo: train.diloco_fragments above 1 or train.diloco_overlap above 0.
  bool outer_streaming = false;
  // expert.shards: a rank holds its place's experts in its expert group of consecutive replicas,
  // so only the replicas at the same place in every expert group hold the same state.
  int expert_shards = 1;
};

// The shape of a job of `world_size` ranks as `config` has it; `replaces_nodes` as above.
RecoveryShape recovery_shape(const JobConfig& config, int world_size, bool replaces_nodes);

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RecoveryShape& x) {
  return f(caf::meta::type_name("RecoveryShape"), x.mode, x.data_parallel, x.pipeline_stages, x.tensor_shards, x.zero,
           x.device_backend, x.compression, x.replaces_nodes, x.checkpoints, x.islands, x.outer_streaming,
           x.expert_shards);
}

}  // namespace troupe::actors
