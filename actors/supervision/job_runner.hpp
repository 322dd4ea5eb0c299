#pragma once
// The job runner: what the job does between attempts, said as the job's events
// (docs/protocols/job-events.md). It reads the restart policy's decision (restart_policy.hpp) and
// announces it: how the attempt ended, which route the job takes on, the layout it changes to,
// and the job's end.

#include <vector>

#include "actors/job_events.hpp"
#include "actors/supervision/restart_policy.hpp"

namespace troupe::actors {

// After attempt `attempt`, which ended as `outcome`, the policy decided `decision` for the job
// shaped `job`: attempt_ended, then recovery_chosen (and layout_changed for a shrink), or job_ended
// when the job finishes or stops. Returns the route the next attempt's ranks resume by.
RecoveryRoute announce_decision(JobEvents& events, int attempt, const AttemptOutcome& outcome,
                                const RestartDecision& decision, const JobShape& job);

// The failure kind of every in-place recovery the events after `after_seq` tell of (an attempt's,
// when `after_seq` is the last sequence number before it began), in order: the counts a restart
// hands the nodes take them.
std::vector<FailureKind> in_place_recoveries(const JobEvents& events, std::int64_t after_seq);

// The job grows by a restart from `before` to `after`, bringing back the host-file nodes `back`.
void announce_grow(JobEvents& events, int attempt, const JobShape& before, const JobShape& after,
                   const std::vector<int>& back);

}  // namespace troupe::actors
