// What the job runner says between attempts (actors/supervision/job_runner.hpp), as job events:
// the attempt's end, the route the job takes on, the layout it changes to, the job's end; and the
// in-place recoveries an attempt's events tell of, which the restart's counts take.

#include <catch2/catch.hpp>

#include "actors/supervision/job_runner.hpp"

using namespace troupe::actors;

namespace {

JobShape two_nodes() { return {{{"a", 1}, {"b", 1}}}; }

RestartOptions checkpointed() {
  RestartOptions options;
  options.checkpoint_dir = "ck";
  options.shape.data_parallel = 2;
  options.shape.checkpoints = true;
  return options;
}

template <class Body>
const Body& body_of(const job_event& event) {
  REQUIRE(caf::holds_alternative<Body>(event.body));
  return caf::get<Body>(event.body);
}

}  // namespace

TEST_CASE("a lost node's attempt ends, and the runner says it restarts from the survivors' rescue snapshot",
          "[runner][events]") {
  JobEvents events;
  AttemptOutcome lost = attempt_outcome({1, "lost node 1", FailureKind::node_lost, {1}, 7, {}});
  const RestartDecision decision = decide_restart({}, lost, checkpointed(), two_nodes());
  CHECK(announce_decision(events, 3, lost, decision, two_nodes()) == RecoveryRoute::restart_from_replica);
  const std::vector<job_event> said = events.since(0);
  REQUIRE(said.size() == 2);
  CHECK(said[0].attempt == 3);
  const attempt_ended& ended = body_of<attempt_ended>(said[0]);
  CHECK((ended.exit_code == 1 && ended.kind == FailureKind::node_lost && ended.nodes == std::vector{1}));
  const recovery_chosen& chosen = body_of<recovery_chosen>(said[1]);
  CHECK((chosen.route == RecoveryRoute::restart_from_replica && chosen.nodes == std::vector{1}));
  CHECK_THAT(chosen.reason, Catch::Contains("rescue snapshot of step 7"));
}

TEST_CASE("a shrink says the nodes left out and the batch the replicas left take", "[runner][events]") {
  JobEvents events;
  RestartOptions options = checkpointed();
  options.elastic = true;
  options.max_restarts = 0;
  AttemptOutcome lost = attempt_outcome({1, "lost node 1", FailureKind::node_lost, {1}, -1, {}});
  const RestartDecision decision = decide_restart({}, lost, options, two_nodes());
  REQUIRE(decision.action == RestartDecision::Action::shrink);
  CHECK(announce_decision(events, 0, lost, decision, two_nodes()) == RecoveryRoute::shrink);
  const std::vector<job_event> said = events.since(0);
  REQUIRE(said.size() == 3);
  CHECK(body_of<recovery_chosen>(said[1]).route == RecoveryRoute::shrink);
  const layout_changed& layout = body_of<layout_changed>(said[2]);
  CHECK((layout.route == RecoveryRoute::shrink && layout.nodes == std::vector{1} && layout.replicas_before == 2 &&
         layout.replicas_after == 1 && layout.per_replica == 2 && layout.per_replica_key == "train.grad_accum"));
}

TEST_CASE("a finished job says so with its counts, and a stopped one with its reason", "[runner][events]") {
  JobEvents events;
  AttemptOutcome done = attempt_outcome({0, "all 2 nodes done", FailureKind::node_exit, {}, -1, {}});
  done.in_place_recoveries = {FailureKind::hang};
  const RestartDecision finish = decide_restart({}, done, checkpointed(), two_nodes());
  CHECK(announce_decision(events, 1, done, finish, two_nodes()) == RecoveryRoute::stop);
  const job_ended finished = body_of<job_ended>(events.since(0).back());
  CHECK((finished.exit_code == 0 && finished.restarts == 0 && finished.counts == "restarts=0 failure.hang=1 "
                                                                                   "recovery.in_place=1"));
  RestartOptions no_dir;
  AttemptOutcome lost = attempt_outcome({1, "lost node 1", FailureKind::node_lost, {1}, -1, {}});
  const RestartDecision stop = decide_restart({}, lost, no_dir, two_nodes());
  announce_decision(events, 2, lost, stop, two_nodes());
  const std::vector<job_event> said = events.since(events.last_seq() - 2);
  REQUIRE(said.size() == 2);
  CHECK(body_of<recovery_chosen>(said[0]).route == RecoveryRoute::stop);
  CHECK((body_of<job_ended>(said[1]).exit_code == 1 && body_of<job_ended>(said[1]).reason == "lost node 1"));
}

TEST_CASE("an attempt's in-place recoveries are read from its events, in order, grows left out", "[runner][events]") {
  JobEvents events;
  events.emit(0, training_resumed{RecoveryRoute::in_place_from_replica, 1, 4, "", {1}, {}, {}, 0.2,
                                  FailureKind::worker_exception});
  const std::int64_t began = events.last_seq();
  events.emit(1, training_resumed{RecoveryRoute::in_place_rollback, 1, 6, "", {0}, {0}, {5}, 0.5,
                                  FailureKind::node_lost});
  events.emit(1, training_resumed{RecoveryRoute::grow_in_place, 2, 8, "", {1}, {1}, {}, 0.4});
  events.emit(1, training_resumed{RecoveryRoute::restart_from_checkpoint, 0, 8, "ck/step-0000008", {}, {}, {}, 0});
  events.emit(1, training_resumed{RecoveryRoute::in_place_from_replica, 3, 9, "", {1}, {1}, {6}, 0.3,
                                  FailureKind::hang});
  CHECK(in_place_recoveries(events, began) == std::vector{FailureKind::node_lost, FailureKind::hang});
  CHECK(in_place_recoveries(events, 0).size() == 3);
}
