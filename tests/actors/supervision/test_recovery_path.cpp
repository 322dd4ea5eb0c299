// The choice between in-place recovery and restarting every node (actors/supervision/recovery_path.hpp):
// in place exactly where a rank of a surviving replica holds the failed worker's whole state (its
// pipeline stage's and tensor shard's part), and otherwise a reason for the log line; and the
// plan that pairs every rank holding fewer steps with a donor of its own stage and shard; where no
// replica holds it and the job writes checkpoints, in place by rollback to the newest checkpoint
// every rank can read.

#include <catch2/catch.hpp>

#include "actors/supervision/recovery_path.hpp"

using namespace troupe::actors;
using troupe::compute::ZeroStage;

namespace {

RecoveryShape plain_dp() {
  RecoveryShape shape;
  shape.mode = RecoveryMode::in_place;
  shape.data_parallel = 2;
  shape.replaces_nodes = true;
  return shape;
}

}  // namespace

TEST_CASE("a worker that threw in a plain data-parallel CPU job recovers in place", "[recovery]") {
  const RecoveryChoice choice = choose_recovery(plain_dp(), FailureKind::worker_exception);
  CHECK(choice.in_place);
  CHECK(choice.why_not.empty());
}

TEST_CASE("a worker that threw in a job with pipeline stages or tensor shards recovers in place", "[recovery]") {
  RecoveryShape pipeline = plain_dp(), shards = plain_dp(), both = plain_dp();
  pipeline.pipeline_stages = 2;
  shards.tensor_shards = 2;
  both.pipeline_stages = 2;
  both.tensor_shards = 2;
  for (const RecoveryShape& shape : {pipeline, shards, both}) {
    INFO("pp " << shape.pipeline_stages << ", tp " << shape.tensor_shards);
    const RecoveryChoice choice = choose_recovery(shape, FailureKind::worker_exception);
    CHECK(choice.in_place);
    CHECK(choice.why_not.empty());
  }
}

TEST_CASE("a lost, silent or unreachable node process of a data-parallel CPU job is replaced in place", "[recovery]") {
  RecoveryShape pipeline = plain_dp(), shards = plain_dp();
  pipeline.pipeline_stages = 2;
  shards.tensor_shards = 2;
  for (const RecoveryShape& shape : {plain_dp(), pipeline, shards})
    for (const FailureKind kind : {FailureKind::node_lost, FailureKind::hang, FailureKind::unreachable}) {
      INFO(to_string(kind) << ", pp " << shape.pipeline_stages << ", tp " << shape.tensor_shards);
      const RecoveryChoice choice = choose_recovery(shape, kind);
      CHECK(choice.in_place);
      CHECK(choice.why_not.empty());
    }
}

TEST_CASE("without a replica but with checkpoints, a failure recovers in place by rollback", "[recovery]") {
  RecoveryShape pipeline = plain_dp(), shards = plain_dp(), both = plain_dp(), one = plain_dp();
  for (RecoveryShape* shape : {&pipeline, &shards, &both, &one}) {
    shape->data_parallel = 1;
    shape->checkpoints = true;
  }
  pipeline.pipeline_stages = 2;
  shards.tensor_shards = 2;
  both.pipeline_stages = 2;
  both.tensor_shards = 2;
  for (const RecoveryShape& shape : {pipeline, shards, both, one})
    for (const FailureKind kind :
         {FailureKind::worker_exception, FailureKind::node_lost, FailureKind::hang, FailureKind::unreachable}) {
      INFO(to_string(kind) << ", pp " << shape.pipeline_stages << ", tp " << shape.tensor_shards);
      const RecoveryChoice choice = choose_recovery(shape, kind);
      CHECK(choice.in_place);
      CHECK(choice.rollback);
      CHECK(choice.why_not.empty());
    }
  // With a replica the state comes from it, checkpoints or not.
  RecoveryShape replicas = plain_dp();
  replicas.pipeline_stages = 2;
  replicas.checkpoints = true;
  const RecoveryChoice from_replica = choose_recovery(replicas, FailureKind::worker_exception);
  CHECK(from_replica.in_place);
  CHECK_FALSE(from_replica.rollback);
  // What in place does not cover is not covered by rollback either.
  RecoveryShape external = pipeline, gpu = pipeline;
  external.replaces_nodes = false;
  gpu.device_backend = true;
  CHECK_FALSE(choose_recovery(external, FailureKind::unreachable).in_place);
  CHECK_FALSE(choose_recovery(gpu, FailureKind::worker_exception).in_place);
}

TEST_CASE("under ZeRO or PowerSGD a replica holds state no other holds, so a failure recovers in place by rollback",
          "[recovery]") {
  RecoveryShape zero1 = plain_dp(), zero2_pipeline = plain_dp(), zero3 = plain_dp(), powersgd_shards = plain_dp();
  zero1.zero = ZeroStage::optimizer_state;
  zero2_pipeline.zero = ZeroStage::gradients;
  zero2_pipeline.pipeline_stages = 2;
  zero3.zero = ZeroStage::parameters;
  powersgd_shards.compression = troupe::comm::Compression::powersgd;
  powersgd_shards.tensor_shards = 2;
  const std::pair<RecoveryShape, const char*> cases[] = {
      {zero1, "train.zero 1 shards the optimizer state: no replica holds a lost shard of the moments"},
      {zero2_pipeline, "train.zero 2 shards the optimizer state"},
      {zero3, "train.zero 3 shards the parameters and the optimizer state: no replica holds a lost shard"},
      {powersgd_shards, "comm.compress powersgd keeps each rank's residual only in its own memory"},
  };
  for (auto [shape, why] : cases) {
    INFO(why);
    shape.checkpoints = true;
    for (const FailureKind kind : {FailureKind::worker_exception, FailureKind::node_lost, FailureKind::hang}) {
      const RecoveryChoice choice = choose_recovery(shape, kind);
      CHECK(choice.in_place);
      CHECK(choice.rollback);
      CHECK(choice.why_not.empty());
    }
    CHECK_THAT(no_replica_reason(shape, 1), Catch::StartsWith(why));
  }
  // bf16 sums keep no state of their own: the replica gives the whole state.
  RecoveryShape bf16 = plain_dp();
  bf16.compression = troupe::comm::Compression::bf16;
  bf16.checkpoints = true;
  const RecoveryChoice from_replica = choose_recovery(bf16, FailureKind::node_lost);
  CHECK(from_replica.in_place);
  CHECK_FALSE(from_replica.rollback);
  // One replica under ZeRO: the grid's reason, as without it.
  RecoveryShape zero_alone = plain_dp();
  zero_alone.data_parallel = 1;
  zero_alone.pipeline_stages = 2;
  zero_alone.zero = ZeroStage::optimizer_state;
  zero_alone.checkpoints = true;
  CHECK(choose_recovery(zero_alone, FailureKind::worker_exception).rollback);
  CHECK(no_replica_reason(zero_alone, 1) == "no replica holds pipeline stage 1's state");
}

TEST_CASE("every case in place does not cover restarts every node, saying why", "[recovery]") {
  struct Case {
    const char* name;
    RecoveryShape shape;
    FailureKind kind;
    const char* says;
  };
  RecoveryShape elsewhere = plain_dp();
  elsewhere.replaces_nodes = false;
  RecoveryShape restart = plain_dp(), one = plain_dp(), one_pipeline = plain_dp(), zero = plain_dp(),
                zero_pipeline = plain_dp(), gpu = plain_dp(), compressed = plain_dp();
  restart.mode = RecoveryMode::restart;
  one.data_parallel = 1;
  one_pipeline.data_parallel = 1;
  one_pipeline.pipeline_stages = 4;
  zero.zero = ZeroStage::optimizer_state;
  zero_pipeline.zero = ZeroStage::gradients;
  zero_pipeline.pipeline_stages = 2;
  gpu.device_backend = true;
  compressed.compression = troupe::comm::Compression::powersgd;
  const Case cases[] = {
      {"fault.recovery restart", restart, FailureKind::worker_exception, "fault.recovery is restart"},
      {"a lost node the job did not start here", elsewhere, FailureKind::node_lost,
       "replaces a node_lost node only where the job's launcher started every node process (not --external)"},
      {"a silent node the job did not start here", elsewhere, FailureKind::hang, "replaces a hang node only where"},
      {"an unreachable node the job did not start here", elsewhere, FailureKind::unreachable,
       "replaces a unreachable node only where"},
      {"a stall", plain_dp(), FailureKind::stall, "not a failure of kind stall"},
      {"a lost node, fault.recovery restart", restart, FailureKind::node_lost, "fault.recovery is restart"},
      {"a lost node of one replica of a pipeline", one_pipeline, FailureKind::node_lost, "no surviving replica"},
      {"one replica", one, FailureKind::worker_exception, "no surviving replica"},
      {"one replica of a pipeline", one_pipeline, FailureKind::worker_exception,
       "no surviving replica holds the failed worker's state (dp 1), and no checkpoint.dir to roll back to"},
      {"ZeRO without checkpoints", zero, FailureKind::worker_exception,
       "train.zero 1 shards the optimizer state: no replica holds a lost shard of the moments, and no checkpoint.dir "
       "to roll back to"},
      {"ZeRO in a pipeline without checkpoints", zero_pipeline, FailureKind::node_lost,
       "train.zero 2 shards the optimizer state"},
      {"a device backend", gpu, FailureKind::worker_exception,
       "in place covers the CPU backend: the state is in GPU memory"},
      {"PowerSGD without checkpoints", compressed, FailureKind::worker_exception,
       "comm.compress powersgd keeps each rank's residual only in its own memory, and no checkpoint.dir"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const RecoveryChoice choice = choose_recovery(c.shape, c.kind);
    CHECK_FALSE(choice.in_place);
    CHECK_THAT(choice.why_not, Catch::Contains(c.says));
  }
}

namespace {

// dp 2 × pp 2 × tp 2: rank = tp + 2·(dp + 2·pp), so (stage, shard) (0, 0) holds ranks 0 and 2,
// (0, 1) ranks 1 and 3, (1, 0) ranks 4 and 6, (1, 1) ranks 5 and 7.
RecoveryShape grid_2x2x2() {
  RecoveryShape shape = plain_dp();
  shape.pipeline_stages = 2;
  shape.tensor_shards = 2;
  return shape;
}

}  // namespace

TEST_CASE("an in-place plan pairs the replacement with the rank of its stage and shard in another replica",
          "[recovery]") {
  // Rank 7 (replica 1, stage 1, shard 1) was respawned; every survivor holds 9 steps.
  std::map<int, std::int64_t> steps{{0, 9}, {1, 9}, {2, 9}, {3, 9}, {4, 9}, {5, 9}, {6, 9}, {7, -1}};
  const RecoveryPlan plan = plan_recovery(grid_2x2x2(), steps);
  CHECK(plan.why_not.empty());
  CHECK(plan.steps == 9);
  CHECK(plan.receivers == std::vector<int>{7});
  CHECK(plan.donors == std::vector<int>{5});
}

TEST_CASE("an in-place plan gives each stage and shard its own donor when several ranks hold fewer steps",
          "[recovery]") {
  // Rank 2 respawned; rank 6 was interrupted in the last wait of step 9, which the others completed.
  std::map<int, std::int64_t> steps{{0, 9}, {1, 9}, {2, -1}, {3, 9}, {4, 9}, {5, 9}, {6, 8}, {7, 9}};
  const RecoveryPlan plan = plan_recovery(grid_2x2x2(), steps);
  CHECK(plan.why_not.empty());
  CHECK(plan.steps == 9);
  CHECK(plan.receivers == std::vector<int>{2, 6});
  CHECK(plan.donors == std::vector<int>{0, 4});
}

TEST_CASE("an in-place plan on plain data parallelism takes the lowest rank holding the most steps", "[recovery]") {
  RecoveryShape shape = plain_dp();
  shape.data_parallel = 3;
  const RecoveryPlan plan = plan_recovery(shape, {{0, 4}, {1, 5}, {2, 5}});
  CHECK(plan.why_not.empty());
  CHECK(plan.steps == 5);
  CHECK(plan.receivers == std::vector<int>{0});
  CHECK(plan.donors == std::vector<int>{1});
}

TEST_CASE("under expert shards an in-place plan takes a donor holding the receiver's experts, or none",
          "[recovery][moe]") {
  RecoveryShape shape = plain_dp();
  shape.data_parallel = 4;
  shape.expert_shards = 2;  // expert groups {0, 1} and {2, 3}: ranks 1 and 3 hold the same experts
  const RecoveryPlan plan = plan_recovery(shape, {{0, 7}, {1, -1}, {2, 7}, {3, 7}});
  CHECK(plan.why_not.empty());
  CHECK(plan.receivers == std::vector<int>{1});
  CHECK(plan.donors == std::vector<int>{3});
  // Both ranks holding expert shard 1 lost: its experts are in no replica.
  const RecoveryPlan none = plan_recovery(shape, {{0, 7}, {1, -1}, {2, 7}, {3, -1}});
  CHECK(none.donors.empty());
  CHECK_THAT(none.why_not, Catch::Contains("expert shard 1"));
}

TEST_CASE("an in-place plan spreads a lost node's ranks over the survivors, a donor each while there are enough",
          "[recovery]") {
  RecoveryShape shape = plain_dp();
  shape.data_parallel = 8;
  // Node 1 of four nodes of two ranks was lost: ranks 2 and 3 hold nothing.
  std::map<int, std::int64_t> steps{{0, 6}, {1, 6}, {2, -1}, {3, -1}, {4, 6}, {5, 6}, {6, 6}, {7, 6}};
  const RecoveryPlan plan = plan_recovery(shape, steps);
  CHECK(plan.why_not.empty());
  CHECK(plan.receivers == std::vector<int>{2, 3});
  CHECK(plan.donors == std::vector<int>{0, 5});
  // More receivers than holders: each holder gives to as many as evenly falls to it.
  const RecoveryPlan few = plan_recovery(shape, {{0, -1}, {1, -1}, {2, -1}, {3, -1}, {4, -1}, {5, 6}, {6, 6}, {7, -1}});
  CHECK(few.receivers == std::vector<int>{0, 1, 2, 3, 4, 7});
  CHECK(few.donors == std::vector<int>{5, 5, 5, 6, 6, 6});
}

TEST_CASE("no in-place plan where a stage and shard has no rank holding the steps others completed", "[recovery]") {
  // (stage 1, shard 0) is ranks 4 and 6: the respawned 4 and 6, interrupted one step behind.
  std::map<int, std::int64_t> steps{{0, 9}, {1, 9}, {2, 9}, {3, 9}, {4, -1}, {5, 9}, {6, 8}, {7, 9}};
  const RecoveryPlan plan = plan_recovery(grid_2x2x2(), steps);
  CHECK_THAT(plan.why_not, Catch::Contains("no replica of pipeline stage 1, tensor shard 0 holds step 9"));
  const RecoveryPlan empty = plan_recovery(grid_2x2x2(), {{0, -1}, {1, -1}});
  CHECK_THAT(empty.why_not, Catch::Contains("no rank holds any state"));
}

TEST_CASE("a rollback plan goes back to the newest checkpoint every rank can read, or names a rank that has none",
          "[recovery]") {
  const RecoveryPlan plan = plan_rollback({{0, 20}, {1, 20}, {2, 18}, {3, 20}});
  CHECK(plan.why_not.empty());
  CHECK(plan.rollback);
  CHECK(plan.steps == 18);
  CHECK(plan.donors.empty());
  CHECK(plan.receivers.empty());
  const RecoveryPlan none = plan_rollback({{0, 20}, {1, -1}});
  CHECK_THAT(none.why_not, Catch::Contains("no complete checkpoint to roll back to (rank 1 finds none"));
}

TEST_CASE("the reason for a rollback names the part of the model no replica holds", "[recovery]") {
  RecoveryShape pipeline = plain_dp(), shards = plain_dp(), both = grid_2x2x2(), one = plain_dp();
  pipeline.data_parallel = shards.data_parallel = one.data_parallel = 1;
  pipeline.pipeline_stages = 2;
  shards.tensor_shards = 2;
  CHECK(no_replica_reason(pipeline, 1) == "no replica holds pipeline stage 1's state");
  CHECK(no_replica_reason(shards, 1) == "no replica holds tensor shard 1's state");
  CHECK(no_replica_reason(both, 5) == "no replica holds pipeline stage 1, tensor shard 1's state");
  CHECK(no_replica_reason(one, 0) == "no replica holds rank 0's state");
}

TEST_CASE("nodes that come back join in place where every rank holds the whole state, else the job restarts to grow",
          "[recovery][grow]") {
  RecoveryShape shrunk = plain_dp();
  shrunk.data_parallel = 1;  // what a shrink from 2 replicas leaves
  CHECK(choose_grow(shrunk).in_place);
  CHECK(choose_grow(shrunk).why_not.empty());
  const auto why_not = [](RecoveryShape shape) {
    const RecoveryChoice choice = choose_grow(shape);
    CHECK_FALSE(choice.in_place);
    return choice.why_not;
  };
  RecoveryShape restart = shrunk;
  restart.mode = RecoveryMode::restart;
  CHECK(why_not(restart) == "fault.recovery is restart");
  RecoveryShape external = shrunk;
  external.replaces_nodes = false;
  CHECK(why_not(external) == "in place grows only where the job's launcher started every node process");
  RecoveryShape device = shrunk;
  device.device_backend = true;
  CHECK(why_not(device) ==
        "in place grows on the CPU backend: the state is in GPU memory, behind a stream an aborted "
        "NCCL communicator may block");
  RecoveryShape pipeline = shrunk;
  pipeline.pipeline_stages = 2;
  CHECK(why_not(pipeline) == "in place grows plain data parallelism, not 2 pipeline stage(s) × 1 tensor shard(s)");
  RecoveryShape zero = shrunk;
  zero.zero = ZeroStage::optimizer_state;
  CHECK(why_not(zero) ==
        "in place grows where every rank holds the whole state, and train.zero 1 shards the "
        "optimizer state: no replica holds a lost shard of the moments");
  RecoveryShape powersgd = shrunk;
  powersgd.compression = troupe::comm::Compression::powersgd;
  CHECK(why_not(powersgd) ==
        "in place grows where every rank holds the whole state, and comm.compress powersgd keeps each rank's "
        "residual only in its own memory");
  RecoveryShape bf16 = shrunk;
  bf16.compression = troupe::comm::Compression::bf16;
  CHECK(choose_grow(bf16).in_place);
}

TEST_CASE(
    "a rescue is asked for only with checkpoint.dir, the CPU backend and a replica holding every rank's state, "
    "under expert shards another expert group",
    "[recovery]") {
  auto shape = [](auto edit) {
    RecoveryShape s;
    s.data_parallel = 2;
    s.checkpoints = true;
    edit(s);
    return s;
  };
  struct Case {
    RecoveryShape shape;
    bool allowed;
    std::string why_not;
  };
  const std::vector<Case> cases = {
      {shape([](RecoveryShape&) {}), true, ""},
      {shape([](RecoveryShape& s) { s.checkpoints = false; }), false, "no checkpoint.dir to restart from"},
      {shape([](RecoveryShape& s) { s.zero = ZeroStage::gradients; }), false,
       "train.zero 2 shards the optimizer state: no replica holds a lost shard of the moments"},
      {shape([](RecoveryShape& s) { s.zero = ZeroStage::parameters; }), false,
       "train.zero 3 shards the parameters and the optimizer state: no replica holds a lost shard"},
      {shape([](RecoveryShape& s) { s.device_backend = true; }), false,
       "the state is in GPU memory, behind a stream an aborted NCCL communicator may block"},
      {shape([](RecoveryShape& s) { s.data_parallel = 1; }), false, "a single data-parallel replica"},
      {shape([](RecoveryShape& s) { s.compression = troupe::comm::Compression::bf16; }), true, ""},
      {shape([](RecoveryShape& s) { s.compression = troupe::comm::Compression::powersgd; }), false,
       "comm.compress powersgd keeps each rank's residual only in its own memory"},
      {shape([](RecoveryShape& s) { s.expert_shards = 2; }), false,
       "one expert group of expert.shards 2: no replica holds a rank's experts"},
      {shape([](RecoveryShape& s) {
         s.data_parallel = 4;
         s.expert_shards = 2;
       }),
       true, ""},
  };
  for (const Case& c : cases) {
    const RescueChoice choice = rescue_choice(c.shape);
    CHECK(choice.allowed == c.allowed);
    CHECK(choice.why_not == c.why_not);
  }
}

TEST_CASE("one rule says whether a replica holds every rank's state, for the rollback, the rescue and the grow",
          "[recovery]") {
  RecoveryShape s;
  s.mode = RecoveryMode::in_place;
  s.data_parallel = 2;
  s.replaces_nodes = true;
  s.checkpoints = true;
  CHECK(replica_state(s).held);
  CHECK_FALSE(choose_recovery(s, FailureKind::worker_exception).rollback);
  CHECK(rescue_choice(s).allowed);
  CHECK(choose_grow(s).in_place);
  s.zero = ZeroStage::optimizer_state;
  const ReplicaState zero = replica_state(s);
  CHECK_FALSE(zero.held);
  // Each decision that needs the state in a replica says the same reason.
  CHECK(choose_recovery(s, FailureKind::worker_exception).rollback);
  CHECK(rescue_choice(s).why_not == zero.why_not);
  CHECK_THAT(choose_grow(s).why_not, Catch::Contains(zero.why_not));
}

TEST_CASE(
    "DiLoCo's islands: the island of a lost node process, or of a worker that threw (its process started again), is "
    "left out and rejoins, as no island holds another's weights; with nodes started elsewhere a throw restarts",
    "[recovery]") {
  RecoveryShape shape = plain_dp();
  shape.islands = 2;
  shape.checkpoints = true;
  shape.replaces_nodes = false;
  const RecoveryChoice external = choose_recovery(shape, FailureKind::worker_exception);
  CHECK_FALSE(external.in_place);
  CHECK_THAT(external.why_not, Catch::Contains("DiLoCo's islands") && Catch::Contains("a worker that threw") &&
                                   Catch::Contains("not --external"));
  shape.replaces_nodes = true;
  for (const FailureKind kind :
       {FailureKind::worker_exception, FailureKind::node_lost, FailureKind::hang, FailureKind::unreachable}) {
    INFO(to_string(kind));
    const RecoveryChoice lost = choose_recovery(shape, kind);
    CHECK((lost.in_place && lost.island_left_out && !lost.rollback && lost.why_not.empty()));
  }
  const ReplicaState state = replica_state(shape);
  CHECK_FALSE(state.held);
  CHECK_THAT(state.why_not, Catch::Contains("islands train weights of their own"));
  CHECK_FALSE(rescue_choice(shape).allowed);
  // One island is plain data parallelism between syncs: its replicas hold the same weights.
  shape.islands = 1;
  CHECK(choose_recovery(shape, FailureKind::worker_exception).in_place);
  CHECK_FALSE(choose_recovery(shape, FailureKind::node_lost).island_left_out);
  CHECK(replica_state(shape).held);
}

TEST_CASE(
    "DiLoCo's islands: the islands lost are the lost ranks', not all of them, with or without streaming or ZeRO, "
    "islands of one rank or of several (replicas, tensor or context shards, stages), among two islands or more",
    "[recovery]") {
  RecoveryShape shape = plain_dp();
  shape.data_parallel = 4;
  shape.islands = 4;
  IslandChoice choice = choose_island_left_out(shape, {3, 1});
  CHECK(choice.lost == std::vector<int>{1, 3});
  CHECK(choice.why_not.empty());
  CHECK(choose_island_left_out(shape, {0, 1, 2, 3}).why_not ==
        "DiLoCo's islands: every island was lost: no island holds the outer state");
  // Streaming: every fragment's sum in flight is posted again over the islands present.
  shape.outer_streaming = true;
  CHECK(choose_island_left_out(shape, {1}).lost == std::vector<int>{1});
  CHECK(choose_recovery(shape, FailureKind::node_lost).island_left_out);
  shape.outer_streaming = false;
  // Under ZeRO the new ranks' shards of the moments start at zero, as a whole rank's moments do.
  shape.zero = ZeroStage::parameters;
  CHECK(choose_island_left_out(shape, {1}).lost == std::vector<int>{1});
  CHECK(choose_recovery(shape, FailureKind::node_lost).island_left_out);
  shape.zero = ZeroStage::none;
  // Two islands of two replicas: rank 1 is island 0's, ranks 2 and 3 island 1's.
  shape.islands = 2;
  CHECK(choose_island_left_out(shape, {1}).lost == std::vector<int>{0});
  CHECK(choose_island_left_out(shape, {3, 2}).lost == std::vector<int>{1});
  CHECK(choose_island_left_out(shape, {1, 2}).why_not ==
        "DiLoCo's islands: every island was lost: no island holds the outer state");
  CHECK(choose_recovery(shape, FailureKind::node_lost).island_left_out);
  // Four islands of two replicas (island 0 ranks 0 and 1, island 3 ranks 6 and 7): the survivors
  // settle a sum in flight among themselves (worker/island_membership.hpp).
  shape.data_parallel = 8;
  shape.islands = 4;
  CHECK(choose_island_left_out(shape, {1}).lost == std::vector<int>{0});
  CHECK(choose_island_left_out(shape, {7, 2}).lost == std::vector<int>{1, 3});
  CHECK(choose_recovery(shape, FailureKind::node_lost).island_left_out);
  // Islands of one replica of two tensor shards or of two stages: two ranks an island, left out
  // among two islands (island 1 is ranks 2, 3 of tp 2, and ranks 1, 3 of pp 2).
  shape.data_parallel = 2;
  shape.islands = 2;
  shape.tensor_shards = 2;
  CHECK(choose_island_left_out(shape, {3}).lost == std::vector<int>{1});
  CHECK(choose_recovery(shape, FailureKind::node_lost).island_left_out);
  shape.tensor_shards = 1;
  shape.pipeline_stages = 2;
  CHECK(choose_island_left_out(shape, {1}).lost == std::vector<int>{1});
  CHECK(choose_island_left_out(shape, {2}).lost == std::vector<int>{0});
  shape.outer_streaming = true;
  CHECK(choose_island_left_out(shape, {1}).lost == std::vector<int>{1});
  shape.outer_streaming = false;
  // Three islands of two stages: island 2 is ranks 2 and 5 (a stage's replicas are together).
  shape.data_parallel = 3;
  shape.islands = 3;
  CHECK(choose_island_left_out(shape, {5}).lost == std::vector<int>{2});
  CHECK(choose_recovery(shape, FailureKind::node_lost).island_left_out);
}
