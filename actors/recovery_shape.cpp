#include "actors/recovery_shape.hpp"

namespace troupe::actors {

RecoveryShape recovery_shape(const JobConfig& config, int world_size, bool replaces_nodes) {
  RecoveryShape shape;
  shape.mode = config.fault.recovery;
  shape.data_parallel = world_size / (config.pipeline.stages * config.tensor.shards);
  shape.pipeline_stages = config.pipeline.stages;
  shape.tensor_shards = config.tensor.shards;
  shape.zero = config.train.zero;
  shape.device_backend = compute::on_device(config.train.backend);
  shape.compression = config.comm.compress;
  shape.islands = config.train.sync == compute::SyncMode::diloco ? config.train.islands : 1;
  shape.outer_streaming = config.train.diloco_fragments > 1 || config.train.diloco_overlap > 0;
  shape.replaces_nodes = replaces_nodes;
  shape.checkpoints = !config.checkpoint.dir.empty();
  shape.expert_shards = config.expert.shards;
  return shape;
}

}  // namespace troupe::actors
