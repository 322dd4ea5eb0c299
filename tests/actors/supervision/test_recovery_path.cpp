// The choice between in-place recovery and restarting every node (actors/supervision/recovery_path.hpp):
// in place exactly where a surviving replica holds the failed worker's whole state, and otherwise
// a reason for the log line.

#include <catch2/catch.hpp>

#include "actors/supervision/recovery_path.hpp"

using namespace troupe::actors;

namespace {

RecoveryShape plain_dp() {
  RecoveryShape shape;
  shape.mode = "in_place";
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

TEST_CASE("a lost or silent node process of a plain data-parallel CPU job is replaced in place", "[recovery]") {
  for (const FailureKind kind : {FailureKind::node_lost, FailureKind::hang}) {
    INFO(to_string(kind));
    const RecoveryChoice choice = choose_recovery(plain_dp(), kind);
    CHECK(choice.in_place);
    CHECK(choice.why_not.empty());
  }
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
  RecoveryShape restart = plain_dp(), one = plain_dp(), pipeline = plain_dp(), shards = plain_dp(), zero = plain_dp(),
                gpu = plain_dp(), compressed = plain_dp();
  restart.mode = "restart";
  one.data_parallel = 1;
  pipeline.pipeline_stages = 2;
  shards.tensor_shards = 2;
  zero.zero = 1;
  gpu.backend = "cuda";
  compressed.compress = "powersgd";
  const Case cases[] = {
      {"fault.recovery restart", restart, FailureKind::worker_exception, "fault.recovery is restart"},
      {"a lost node the job did not start here", elsewhere, FailureKind::node_lost,
       "replaces a node_lost node only where the job started every node process on this machine"},
      {"a silent node the job did not start here", elsewhere, FailureKind::hang, "replaces a hang node only where"},
      {"an unreachable node", plain_dp(), FailureKind::unreachable, "not a failure of kind unreachable"},
      {"a stall", plain_dp(), FailureKind::stall, "not a failure of kind stall"},
      {"a lost node, fault.recovery restart", restart, FailureKind::node_lost, "fault.recovery is restart"},
      {"a lost node of a pipeline", pipeline, FailureKind::node_lost, "not pipeline.stages 2"},
      {"one replica", one, FailureKind::worker_exception, "no surviving replica"},
      {"pipeline stages", pipeline, FailureKind::worker_exception, "not pipeline.stages 2"},
      {"tensor shards", shards, FailureKind::worker_exception, "not tensor.shards 2"},
      {"ZeRO", zero, FailureKind::worker_exception, "train.zero 1 shards the optimizer state"},
      {"a device backend", gpu, FailureKind::worker_exception, "not train.backend cuda"},
      {"compressed sums", compressed, FailureKind::worker_exception, "not comm.compress powersgd"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const RecoveryChoice choice = choose_recovery(c.shape, c.kind);
    CHECK_FALSE(choice.in_place);
    CHECK_THAT(choice.why_not, Catch::Contains(c.says));
  }
}
