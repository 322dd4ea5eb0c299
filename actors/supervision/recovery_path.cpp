#include "actors/supervision/recovery_path.hpp"

namespace troupe::actors {

RecoveryChoice choose_recovery(const RecoveryShape& shape, FailureKind kind) {
  auto restart = [](std::string why) { return RecoveryChoice{false, std::move(why)}; };
  if (shape.mode != "in_place") return restart("fault.recovery is " + shape.mode);
  const bool node_gone = kind == FailureKind::node_lost || kind == FailureKind::hang;
  if (kind != FailureKind::worker_exception && !node_gone)
    return restart("in place covers a worker that threw and a lost or silent node process, not a failure of kind " +
                   std::string(to_string(kind)));
  if (node_gone && !shape.replaces_nodes)
    return restart("in place replaces a " + std::string(to_string(kind)) +
                   " node only where the job started every node process on this machine (not --external, no "
                   "remote host)");
  if (shape.data_parallel < 2) return restart("no surviving replica holds the failed worker's state (dp 1)");
  if (shape.pipeline_stages > 1)
    return restart("in place covers plain data parallelism, not pipeline.stages " +
                   std::to_string(shape.pipeline_stages));
  if (shape.tensor_shards > 1)
    return restart("in place covers plain data parallelism, not tensor.shards " + std::to_string(shape.tensor_shards));
  if (shape.zero > 0)
    return restart("train.zero " + std::to_string(shape.zero) +
                   " shards the optimizer state: no replica holds the failed worker's shard");
  if (shape.compress != "none")
    return restart("in place covers uncompressed gradient sums, not comm.compress " + shape.compress);
  if (shape.backend != "cpu") return restart("in place covers the CPU backend, not train.backend " + shape.backend);
  return {true, {}};
}

RecoveryShape recovery_shape(const JobConfig& config, int world_size, bool replaces_nodes) {
  return {config.fault.recovery,     world_size / (config.pipeline.stages * config.tensor.shards),
          config.pipeline.stages,    config.tensor.shards,
          config.train.zero,         config.train.backend,
          config.comm.compress,      replaces_nodes};
}

}  // namespace troupe::actors
