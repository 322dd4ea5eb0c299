#include "actors/supervision/job_runner.hpp"

#include <limits>
#include <string>

namespace troupe::actors {
namespace {

int replicas(const JobShape& job) {
  int world = 0;
  for (const NodeShape& node : job.nodes) world += node.slots;
  return world / (job.stages * job.shards);
}

// The micro-batches each replica sums, and the key that says so.
std::pair<int, std::string> per_replica(const JobShape& job, const BatchShape& batch) {
  if (job.stages > 1) return {batch.microbatches, "pipeline.microbatches"};
  return {batch.grad_accum, "train.grad_accum"};
}

}  // namespace

RecoveryRoute announce_decision(JobEvents& events, int attempt, const AttemptOutcome& outcome,
                                const RestartDecision& decision, const JobShape& job) {
  using Action = RestartDecision::Action;
  events.emit(attempt, attempt_ended{outcome.exit_code, outcome.failure_kind.value_or(FailureKind::node_exit),
                                     outcome.failed_nodes, outcome.reason});
  const int restarts = decision.next.counts.restarts;
  switch (decision.action) {
    case Action::finish:
      events.emit(attempt, job_ended{0, restarts, decision.next.counts.to_text(), outcome.reason});
      return RecoveryRoute::stop;
    case Action::stop:
      events.emit(attempt, recovery_chosen{RecoveryRoute::stop, 0, outcome.failed_nodes,
                                           decision.recovery.empty() ? "stopping the job" : decision.recovery});
      events.emit(attempt, job_ended{decision.exit_code, restarts, decision.next.counts.to_text(), decision.reason});
      return RecoveryRoute::stop;
    case Action::restart_from_replica:
    case Action::restart_from_checkpoint: {
      const RecoveryRoute route = decision.action == Action::restart_from_replica
                                      ? RecoveryRoute::restart_from_replica
                                      : RecoveryRoute::restart_from_checkpoint;
      events.emit(attempt, recovery_chosen{route, 0, outcome.failed_nodes, decision.recovery});
      return route;
    }
    case Action::shrink: {
      events.emit(attempt, recovery_chosen{RecoveryRoute::shrink, 0, decision.drop, decision.recovery});
      const auto [count, key] = per_replica(job, decision.shrink->batch);
      const int before = replicas(job);
      const int stage_ranks = job.stages * job.shards;
      int kept = 0;
      for (int index : decision.shrink->kept) kept += job.nodes.at(static_cast<std::size_t>(index)).slots;
      events.emit(attempt, layout_changed{RecoveryRoute::shrink, decision.drop, before, kept / stage_ranks,
                                          decision.shrink->batch.batch_size, count, key});
      return RecoveryRoute::shrink;
    }
    case Action::grow:
      events.emit(attempt, recovery_chosen{RecoveryRoute::grow_by_restart, 0, {}, decision.recovery});
      return RecoveryRoute::grow_by_restart;
  }
  return RecoveryRoute::stop;
}

std::vector<FailureKind> in_place_recoveries(const JobEvents& events, std::int64_t after_seq) {
  std::vector<FailureKind> kinds;
  for (const job_event& event : events.since(after_seq, std::numeric_limits<std::size_t>::max()))
    if (const auto* resumed = caf::get_if<training_resumed>(&event.body))
      if (resumed->route == RecoveryRoute::in_place_from_replica || resumed->route == RecoveryRoute::in_place_rollback)
        kinds.push_back(resumed->kind);
  return kinds;
}

void announce_grow(JobEvents& events, int attempt, const JobShape& before, const JobShape& after,
                   const std::vector<int>& back) {
  const auto [count, key] = per_replica(after, after.batch);
  events.emit(attempt, layout_changed{RecoveryRoute::grow_by_restart, back, replicas(before), replicas(after),
                                      after.batch.batch_size, count, key});
}

}  // namespace troupe::actors
