#include "actors/supervision/recovery_path.hpp"

namespace troupe::actors {

RecoveryChoice choose_recovery(const RecoveryShape& shape, FailureKind kind) {
  auto restart = [](std::string why) { return RecoveryChoice{false, std::move(why)}; };
  if (shape.mode != "in_place") return restart("fault.recovery is " + shape.mode);
  if (kind != FailureKind::worker_exception)
    return restart("in place covers a worker that threw, not a " + std::string(to_string(kind)) +
                   " failure (its node process would have to be replaced)");
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

}  // namespace troupe::actors
