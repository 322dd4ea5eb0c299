#pragma once
// The job runner: the job across its attempts (docs/drills.md, "Recovery"; docs/launch.md). It
// runs one attempt at a time (attempt.hpp), asks the restart policy what follows each
// (restart_policy.hpp) and does it: finish, stop, restart from the survivors' rescue snapshot or
// the newest checkpoint, shrink without nodes that cannot come back, grow back to the nodes left
// out (the shell's rejoin, or a new spare line); it owns the host file's nodes and its spare
// lines. It says what it does as the job's events (job_events.hpp), and what the policy logs.
//
//        ┌──────────── restart (same nodes) / shrink (fewer) / grow (the left-out back) ◄──┐
//        ▼                                                                                 │
//   attempt ─► ended: the policy's decision ─► finish (0) / stop (the attempt's code) ─────┴─► job end
//
// `troupe launch` parses, checks and calls run_job with its node starter; `--external` calls
// run_external_job, whose nodes another launcher started.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "actors/control/control_port.hpp"
#include "actors/job_events.hpp"
#include "actors/supervision/attempt.hpp"
#include "actors/supervision/node_starter.hpp"
#include "actors/supervision/restart_policy.hpp"

namespace troupe::actors {

// How the job ended: its exit code (0 success; else the attempt's, as the policy stopped it) and,
// when it failed, the one line that says why.
struct JobEnd {
  int exit_code = 0;
  std::string reason;
};

// The job of `config` on `lines` (the host file's nodes; `spares`, its spare lines), every node
// started by `starter`, until it finishes or stops.
JobEnd run_job(const JobContactOptions& contact, const JobConfig& config, const std::vector<NodeShape>& lines,
               const std::vector<NodeShape>& spares, NodeStarter& starter, ControlPort& control, JobEvents& events);

// The job of `nodes` one-rank nodes that another launcher started (srun, torchrun, by hand): one
// attempt, since nothing here can start a node again; a failure ends the job, after the survivors'
// rescue snapshot where checkpoint.dir allows one.
JobEnd run_external_job(const JobContactOptions& contact, const JobConfig& config, int nodes, ControlPort& control,
                        JobEvents& events);

// After attempt `attempt`, which ended as `outcome`, the policy decided `decision` for the job
// shaped `job`: attempt_ended, then recovery_chosen (and layout_changed for a shrink), or job_ended
// when the job finishes or stops. Returns the route the next attempt's ranks resume by.
RecoveryRoute announce_decision(JobEvents& events, int attempt, const AttemptOutcome& outcome,
                                const RestartDecision& decision, const JobShape& job);

// The failure kind of every in-place recovery the events after `after_seq` tell of (an attempt's,
// when `after_seq` is the last sequence number before it began), in order: the counts a restart
// hands the nodes take them.
std::vector<FailureKind> in_place_recoveries(const JobEvents& events, std::int64_t after_seq);

}  // namespace troupe::actors
