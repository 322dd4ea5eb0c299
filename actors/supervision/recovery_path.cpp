#include "actors/supervision/recovery_path.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

#include "comm/grid.hpp"

namespace troupe::actors {

namespace {

// Why a rank of a data-parallel job holds state that no other replica holds: its ZeRO shard, or
// its PowerSGD residual. Empty when every replica holds the same state (or there is one replica).
std::string state_of_its_own(const RecoveryShape& shape) {
  if (shape.data_parallel < 2) return {};
  if (compute::shards_parameters(shape.zero))
    return "train.zero 3 shards the parameters and the optimizer state: no replica holds a lost shard";
  if (compute::shards_optimizer_state(shape.zero))
    return compute::zero_setting(shape.zero) +
           " shards the optimizer state: no replica holds a lost shard of the moments";
  if (shape.compression == comm::Compression::powersgd)
    return "comm.compress powersgd keeps each rank's residual only in its own memory";
  if (shape.islands > 1) return "DiLoCo's islands train weights of their own between syncs: no other island holds them";
  if (shape.expert_shards > 1 && shape.expert_shards >= shape.data_parallel)
    return "one expert group of expert.shards " + std::to_string(shape.expert_shards) +
           ": no replica holds a rank's experts";
  return {};
}

// Why in place does not cover a device backend, for every choice that says so.
constexpr const char* device_state =
    "the state is in GPU memory, behind a stream an aborted NCCL communicator may block";

}  // namespace

ReplicaState replica_state(const RecoveryShape& shape) {
  if (shape.data_parallel < 2) return {false, "a single data-parallel replica"};
  if (std::string own = state_of_its_own(shape); !own.empty()) return {false, std::move(own)};
  return {true, {}};
}

RecoveryChoice choose_recovery(const RecoveryShape& shape, FailureKind kind) {
  auto restart = [](std::string why) { return RecoveryChoice{false, false, std::move(why)}; };
  if (shape.mode != RecoveryMode::in_place) return restart("fault.recovery is restart");
  const bool node_gone = node_process_gone(kind);
  if (kind != FailureKind::worker_exception && !node_gone)
    return restart(
        "in place covers a worker that threw and a lost, silent or unreachable node process, not a failure of kind " +
        std::string(to_string(kind)));
  if (node_gone && !shape.replaces_nodes)
    return restart("in place replaces a " + std::string(to_string(kind)) +
                   " node only where the job's launcher started every node process (not --external)");
  if (shape.device_backend) return restart(std::string("in place covers the CPU backend: ") + device_state);
  // No replica holds an island's weights: a lost island is left out (choose_island_left_out), and
  // anything else restarts from the newest checkpoint, which holds the outer state (docs/diloco.md).
  // A worker that threw takes its node process with it: the process is started again, as a lost
  // one is, which only the job's own launcher can do.
  if (shape.islands > 1) {
    if (!node_gone && !shape.replaces_nodes)
      return restart(
          "DiLoCo's islands leave out the island of a worker that threw by starting its node process again, which "
          "only the job's launcher can do (not --external)");
    const IslandChoice island = choose_island_left_out(shape, {});
    if (!island.why_not.empty()) return restart(island.why_not);
    return {true, false, {}, true};
  }
  const ReplicaState state = replica_state(shape);
  if (!state.held && !shape.checkpoints)
    return restart(
        (shape.data_parallel < 2 ? "no surviving replica holds the failed worker's state (dp 1)" : state.why_not) +
        ", and no checkpoint.dir to roll back to");
  return {true, !state.held, {}};
}

IslandChoice choose_island_left_out(const RecoveryShape& shape, const std::vector<int>& lost_ranks) {
  auto restart = [](std::string why) { return IslandChoice{{}, "DiLoCo's islands: " + std::move(why)}; };
  IslandChoice choice;
  const comm::Grid grid{shape.data_parallel, shape.pipeline_stages, shape.tensor_shards};
  for (int rank : lost_ranks) {
    const int island = comm::island_of(grid, rank, shape.islands);
    if (std::find(choice.lost.begin(), choice.lost.end(), island) == choice.lost.end()) choice.lost.push_back(island);
  }
  std::sort(choice.lost.begin(), choice.lost.end());
  if (static_cast<int>(choice.lost.size()) >= shape.islands)
    return restart("every island was lost: no island holds the outer state");
  return choice;
}

RecoveryChoice choose_grow(const RecoveryShape& shape) {
  auto restart = [](std::string why) { return RecoveryChoice{false, false, "in place grows " + std::move(why)}; };
  if (shape.mode != RecoveryMode::in_place) return {false, false, "fault.recovery is restart"};
  if (!shape.replaces_nodes) return restart("only where the job's launcher started every node process");
  if (shape.device_backend) return restart(std::string("on the CPU backend: ") + device_state);
  if (shape.pipeline_stages > 1 || shape.tensor_shards > 1)
    return restart("plain data parallelism, not " + std::to_string(shape.pipeline_stages) + " pipeline stage(s) × " +
                   std::to_string(shape.tensor_shards) + " tensor shard(s)");
  // The job that grows may have shrunk to one replica: what matters is whether its state is the
  // whole state, which a lone replica's is.
  if (std::string own = state_of_its_own({shape.mode, 2, 1, 1, shape.zero, false, shape.compression}); !own.empty())
    return restart("where every rank holds the whole state, and " + own);
  return {true, false, {}};
}

RescueChoice rescue_choice(const RecoveryShape& shape) {
  if (!shape.checkpoints) return {false, "no checkpoint.dir to restart from"};
  if (shape.device_backend) return {false, device_state};
  if (const ReplicaState state = replica_state(shape); !state.held) return {false, state.why_not};
  return {true, {}};
}

RecoveryPlan plan_recovery(const RecoveryShape& shape, const std::map<int, std::int64_t>& steps_done) {
  RecoveryPlan plan;
  for (const auto& [rank, steps] : steps_done) plan.steps = std::max(plan.steps, steps);
  if (plan.steps < 0) {
    plan.why_not = "no rank holds any state";
    return plan;
  }
  const comm::Grid grid{shape.data_parallel, shape.pipeline_stages, shape.tensor_shards};
  // By (stage, shard, place in the expert group), in rank order: the ranks holding plan.steps, and
  // those holding fewer.
  std::map<std::tuple<int, int, int>, std::vector<int>> holders, short_of;
  for (const auto& [rank, steps] : steps_done) {
    const comm::GridCoord at = comm::grid_coord(grid, rank);
    (steps == plan.steps ? holders : short_of)[{at.pp, at.tp, at.dp % shape.expert_shards}].push_back(rank);
  }
  std::map<int, int> donor_of;  // receiver → donor
  for (const auto& [place, receivers] : short_of) {
    const auto found = holders.find(place);
    if (found == holders.end()) {
      const auto [stage, shard, experts] = place;
      plan.why_not = "no replica of pipeline stage " + std::to_string(stage) + ", tensor shard " +
                     std::to_string(shard) +
                     (shape.expert_shards > 1 ? ", expert shard " + std::to_string(experts) : std::string()) +
                     " holds step " + std::to_string(plan.steps) + ", which others completed";
      return plan;
    }
    // The k-th of R receivers takes the (k · D / R)-th of D holders: a lost node's ranks each from a
    // donor of their own, spread over the survivors, so the state moves in parallel rather than
    // one receiver after another from one rank; several each only where receivers outnumber holders.
    const std::vector<int>& donors = found->second;
    for (std::size_t k = 0; k < receivers.size(); ++k)
      donor_of.emplace(receivers[k], donors[k * donors.size() / receivers.size()]);
  }
  for (const auto& [receiver, donor] : donor_of) {
    plan.receivers.push_back(receiver);
    plan.donors.push_back(donor);
  }
  return plan;
}

RecoveryPlan plan_rollback(const std::map<int, std::int64_t>& checkpoint_steps) {
  RecoveryPlan plan;
  plan.rollback = true;
  for (const auto& [rank, step] : checkpoint_steps) {
    if (step < 0) {
      plan.why_not = "no complete checkpoint to roll back to (rank " + std::to_string(rank) +
                     " finds none in checkpoint.dir)";
      return plan;
    }
    plan.steps = plan.steps < 0 ? step : std::min(plan.steps, step);
  }
  if (plan.steps < 0) plan.why_not = "no rank reported a checkpoint to roll back to";
  return plan;
}

std::string no_replica_reason(const RecoveryShape& shape, int rank) {
  if (std::string own = state_of_its_own(shape); !own.empty()) return own;
  const comm::Grid grid{shape.data_parallel, shape.pipeline_stages, shape.tensor_shards};
  const comm::GridCoord at = comm::grid_coord(grid, rank);
  std::string part;
  if (grid.pp > 1) part = "pipeline stage " + std::to_string(at.pp);
  if (grid.tp > 1) part += (part.empty() ? "" : ", ") + std::string("tensor shard ") + std::to_string(at.tp);
  if (part.empty()) part = "rank " + std::to_string(rank);
  return "no replica holds " + part + "'s state";
}

}  // namespace troupe::actors
