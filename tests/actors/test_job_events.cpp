// The job's events (actors/job_events.hpp, docs/protocols/job-events.md): every body crosses a
// serialization whole, the variant's order (its wire index) and names are the documented ones, the
// text form is pinned, and the log hands readers what came after what they saw.

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <thread>

#include "actors/actor_system_setup.hpp"
#include "actors/messages.hpp"
#include "actors/round_trip.hpp"

using namespace troupe::actors;
using troupe::test::round_trip;

namespace {

// One event of each body, in the variant's order, every field set.
std::vector<job_event_body> one_of_each() {
  return {
      node_joined{2, "h2", 4711, 4700, true},
      job_started{3, 6},
      step_trained{17, 2.25},
      failure_detected{FailureKind::node_lost, {1}, {2, 3}, "lost node 1"},
      recovery_chosen{RecoveryRoute::in_place_rollback, 4, {1}, "no replica holds pipeline stage 1's state"},
      state_moved{RecoveryRoute::in_place_from_replica, 4, 123456, 0.5, {0}, {1}},
      training_resumed{
          RecoveryRoute::in_place_from_replica, 4, 16, "rank 0's memory", {1}, {1}, {4700}, 1.25, FailureKind::hang},
      straggler_named{5, 2, 0.125, 0.75},
      checkpoint_noted{CheckpointOutcome::skipped, 0, 40, "skipped step-0000040: hash mismatch"},
      layout_changed{RecoveryRoute::shrink, {1}, 2, 1, 8, 2, "train.grad_accum"},
      attempt_ended{1, FailureKind::node_lost, {1}, "lost node 1"},
      job_ended{0, 2, "restarts=2 failure.node_lost=2", "all 2 nodes done"}};
}

}  // namespace

TEST_CASE("every event body has its documented name, in the variant's (wire) order", "[events]") {
  const std::vector<std::string> names{"node_joined",      "job_started",    "step_trained",     "failure_detected",
                                       "recovery_chosen",  "state_moved",    "training_resumed", "straggler_named",
                                       "checkpoint_noted", "layout_changed", "attempt_ended",    "job_ended"};
  const std::vector<job_event_body> bodies = one_of_each();
  REQUIRE(bodies.size() == names.size());
  for (std::size_t i = 0; i < bodies.size(); ++i) {
    CHECK(bodies[i].index() == i);
    CHECK(event_name(bodies[i]) == names[i]);
  }
  // docs/protocols/job-events.md lists every body by name.
  std::ifstream doc(std::string(TROUPE_SOURCE_DIR) + "/docs/protocols/job-events.md");
  std::stringstream text;
  text << doc.rdbuf();
  for (const std::string& name : names) CHECK_THAT(text.str(), Catch::Contains("`" + name + "`"));
}

TEST_CASE("every event crosses a serialization whole, and a request and reply for events do too", "[events]") {
  TroupeConfig cfg;
  caf::actor_system system{cfg};
  std::int64_t seq = 0;
  for (const job_event_body& body : one_of_each()) {
    const job_event sent{++seq, 1.7e9 + static_cast<double>(seq), 3, body};
    const job_event got = round_trip(system, sent);
    CHECK((got.seq == sent.seq && got.unix_seconds == sent.unix_seconds && got.attempt == 3));
    CHECK(to_text(got) == to_text(sent));
  }
  const events_request_msg request = round_trip(system, events_request_msg{"tok", 41, 500});
  CHECK((request.token == "tok" && request.after == 41 && request.limit == 500));
  const events_reply_msg reply =
      round_trip(system, events_reply_msg{"", {job_event{42, 1.5, 0, step_trained{7, 3.0}}}, 43});
  REQUIRE(reply.events.size() == 1);
  CHECK((reply.last_seq == 43 && reply.events[0].seq == 42 && caf::get<step_trained>(reply.events[0].body).step == 7));
}

TEST_CASE("an event's text form names its body and every field", "[events]") {
  const job_event moved{7, 12.5, 2, state_moved{RecoveryRoute::in_place_from_replica, 1, 5200000, 0.25, {0}, {1}}};
  CHECK(to_text(moved) ==
        "7 12.500 attempt=2 state_moved route=in_place_from_replica epoch=1 bytes=5200000 "
        "seconds=0.250 donors=0 receivers=1");
  const job_event failed{8, 13, 2, failure_detected{FailureKind::hang, {1, 2}, {}, "silent"}};
  CHECK(to_text(failed) == "8 13.000 attempt=2 failure_detected kind=hang nodes=1,2 ranks= reason=silent");
}

TEST_CASE("the event log numbers events from 1, hands a reader what came after what it saw, and keeps the newest",
          "[events]") {
  JobEvents events(3);
  CHECK(events.last_seq() == 0);
  CHECK(events.emit(0, job_started{2, 2}) == 1);
  CHECK(events.emit(0, step_trained{1, 3.5}, 100.0) == 2);
  const std::vector<job_event> all = events.since(0);
  REQUIRE(all.size() == 2);
  CHECK(all[1].unix_seconds == 100.0);
  CHECK(events.since(1).front().seq == 2);
  CHECK(events.since(2).empty());
  for (int step = 2; step <= 4; ++step) events.emit(1, step_trained{step, 3.0});
  // Capacity 3: events 1 and 2 are gone; a reader behind sees the gap in the numbers.
  const std::vector<job_event> kept = events.since(0);
  REQUIRE(kept.size() == 3);
  CHECK((kept.front().seq == 3 && kept.back().seq == 5 && kept.back().attempt == 1));
  CHECK(events.since(0, 2).size() == 2);
}

TEST_CASE("a reader waiting for the next event wakes when it comes, and times out when none does", "[events]") {
  JobEvents events;
  CHECK_FALSE(events.wait_after(0, std::chrono::milliseconds(20)));
  std::thread emitter([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    events.emit(0, job_started{1, 1});
  });
  CHECK(events.wait_after(0, std::chrono::seconds(10)));
  emitter.join();
}
