#pragma once
// One attempt at the job (job_runner.hpp runs them one after the other): an actor system of its
// own holding the job supervisor, the frame guard in front of the job's port, this attempt's
// monitor on the job's control port, and the node processes the starter runs (none with nodes
// started elsewhere). It returns how the attempt ended, as the restart policy reads it.
//
//   setup ─► supervisor published, guard listening, monitor open ─► starter.run() (blocks)
//         ─► the supervisor's outcome (or the starter's, for a node that never joined)
//         ─► `ended` (the runner decides and says so while this attempt's monitor still answers)
//         ─► the actor system ends
//
// Meanwhile the supervisor asks, on its own thread, for a lost node's process again (the starter's
// start_again, or move to a spare line for an unreachable host) and for the nodes of a grow.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "actors/control/control_port.hpp"
#include "actors/job_events.hpp"
#include "actors/recovery_counts.hpp"
#include "actors/supervision/job_supervisor.hpp"
#include "actors/supervision/node_starter.hpp"
#include "actors/supervision/restart_policy.hpp"

namespace troupe::actors {

// Where the job's nodes join it, and how it tells its own nodes from others.
struct JobContactOptions {
  std::string bind = "127.0.0.1";  // the address the job listens on
  int port = 0;                    // 0: any free port
  std::chrono::milliseconds join_timeout{60000};
  std::string token;
  std::string build_id;
  // The hash a node of `config` presents when it joins (its config must be the job's).
  std::function<std::uint64_t(const JobConfig&)> config_hash;
  // Each data-parallel replica's speed in `config` (its train.replica_speeds read; empty: even), for
  // the split of a job that grows in place under train.balance.
  std::function<std::vector<double>(const JobConfig&)> replica_speeds;
};

// The host file's spare lines not used yet, and the nodes moved to one: node index → its spare.
struct SpareLines {
  std::vector<NodeShape> free;
  std::vector<std::pair<int, NodeShape>> taken;
};

struct AttemptSetup {
  std::vector<NodeShape> lines;  // the attempt's nodes, in node order
  JobConfig config;
  RecoveryCounts counts;  // what the job has been through: every node starts its counters there
  int attempts_before = 0;  // the job's attempts that ended before this one
  // The route this attempt's ranks resume by (JobPlan::start_route).
  RecoveryRoute start_route = RecoveryRoute::restart_from_checkpoint;
  // Derived once by the runner for the attempt's world (replaces_nodes where the runner's starter
  // starts every node); it also says whether survivors may be asked for a rescue snapshot.
  RecoveryShape recovery;
};

struct AttemptHooks {
  // The shell's rejoin while the attempt runs, where in place grows: starts the nodes left out (as
  // attempt `attempt`) and says which they are (JobPlan::grow_nodes); empty: no grow in place.
  std::function<GrownNodes(int attempt)> grow_nodes;
  std::function<void()> grew;  // the job runs grown (JobPlan::grew)
  // The attempt ended as `outcome`: called before its monitor goes, so the runner's word on it
  // reaches the job's event readers through this attempt's control port.
  std::function<void(AttemptOutcome& outcome)> ended;
};

// Runs one attempt. `attempt` is its TROUPE_ATTEMPT; each node process started again in place
// begins a new one, and `attempt` ends as the last. `starter` null: the nodes were started
// elsewhere (one rank each) and only join; nothing is started again.
AttemptOutcome run_attempt(const JobContactOptions& contact, const AttemptSetup& setup, int& attempt,
                           NodeStarter* starter, SpareLines& spares, ControlPort& control, JobEvents& events,
                           const AttemptHooks& hooks);

}  // namespace troupe::actors
