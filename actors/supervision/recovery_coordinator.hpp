#pragma once
// The job supervisor's recovering phase: the in-place recovery and grow protocol
// (docs/protocols/control-plane.md, "In-place recovery"; docs/drills.md). Only what died is
// respawned — a worker that threw in its own process, or a lost, silent or unreachable node's
// process started again by the launcher — or, for a grow, the nodes the job went on without are
// started; the survivors keep their processes and give each new rank its state over the data plane
// (or every rank reads its own shards of the newest checkpoint: a rollback). Which of these applies
// is recovery_path.hpp's pure choice; this file runs it.
//
//            worker_failed_msg, a node lost, silent or unreachable (in place applies), the shell's rejoin
//   running ──────────────────────────────────────────────────────────────────────────────────────────┐
//      ▲       recover_msg to every node (survivors give up their step; a node respawns its failed      │
//      │       worker); a lost node's or a grow's processes started by the launcher; timer armed        ▼
//      │                                                                                  ┌───────────────────┐
//      │                                                                                  │ recovering:       │
//      │  another node lost or silent before the plan: its process started too (widened) │   gathering       │
//      │  each new process joins: once all joined, start_msg + recover_msg to each ──────►│                   │
//      │                                                                                  └───────────────────┘
//      │                                    every rank's recover_ready_msg: plan_recovery (donors) or   │
//      │                                    plan_rollback; recover_plan_msg to every rank               ▼
//      │                                                                                  ┌───────────────────┐
//      │  every rank's recover_done_msg: state_moved and training_resumed (or the grown   │ recovering:       │
//      └─ start_msg to every node); running on ◄──────────────────────────────────────────│   restoring       │
//                                                                                         └───────────────────┘
//   gathering or restoring: no plan possible, a rank's error, a new process exiting before it joined,
//   a worker failing again, a node lost after the plan, or the timer ─► "recovery: restarting every
//   node: <why>" and the failure goes the way the job supervisor's header says (rescuing or ended);
//   a grow that fails ends the attempt as a rejoin (the launcher grows by a restart).
//
// State of its own: recovery_in_progress (job_supervisor_state.hpp): the goal (respawn a worker,
// replace nodes, grow), the step (gathering, restoring), every rank's readiness and report, the
// processes started, the plan.

#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/supervision/job_supervisor_state.hpp"

namespace troupe::actors::supervision {

// running: a node's worker threw (the node waits for the job's word). In place where it applies:
// every node gets the order (the failed worker's node respawns it, every other worker gives up its
// step), else the node's failure goes the usual way.
void on_worker_failed(job_actor* self, const worker_failed_msg& failed);

// running or recovering: `nodes` were lost or went silent or unreachable (several only where their
// one host became unreachable). In place where it applies and nothing else is failing: the
// launcher starts each one's process again and every surviving worker gives up its step; during a
// recovery that has no plan yet, the recovery widens to them. Returns false where the job restarts
// every node instead, that line logged.
bool replace_in_place(job_actor* self, const std::vector<int>& nodes, FailureKind kind, const std::string& reason);

// The shell's rejoin (its checkpoint committed). Where in place grows (recovery_path.hpp's
// choose_grow) and nothing else is failing, the launcher starts the nodes the job went on without
// and every node gets the grow order (grown). A grow or recovery under way, or no node left out,
// refuses it: one line (`refusal`), and the job goes on. Elsewhere the job grows by a restart
// (by_restart).
struct GrowAnswer {
  enum class Route { grown, refused, by_restart } route;
  std::string refusal;
};
GrowAnswer grow_in_place(job_actor* self);

// Whether node `node_index`'s process was started by the recovery in progress and has not joined.
bool awaited_replacement(const job_supervisor_state& st, int node_index);
// That process joined: once every new process did, each gets its start with the recovery's order.
void join_replacement(job_actor* self, const join_msg& m);

// The recovering phase's behaviour (the running phase's handlers answer the rest).
caf::behavior recovering(job_actor* self);

// The steps island_coordinator.hpp shares with the in-place recovery.
// running ─► recovering: the recovery's state, its recovery_chosen event (`reason`), its timer.
void begin_recovery(job_actor* self, recovery_in_progress recovery, const std::string& reason);
// recovering ─► running: the recovery is over, done or given up.
void leave_recovery(job_actor* self);
// The recovery in progress cannot complete: the job fails as the failure it answered would have.
void fail_in_place(job_actor* self, std::string reason);
// A recovery toward `goal` that starts the processes of `nodes` again, as of now: the epoch after the
// job's last, the first node's first rank named as the failed one, `kind` and `reason`; the caller
// gives its order.
recovery_in_progress replacing_nodes(const job_supervisor_state& st, recovery_in_progress::Goal goal,
                                     const std::vector<int>& nodes, FailureKind kind, const std::string& reason);
// Starts the processes of `nodes` again for `recovery` (JobPlan::replace_nodes), each the job's next
// attempt, their ranks the order's failed ranks: where each went, for the log ("node 1's process
// again on its host h1"), or "" with `why_not` set where none could.
std::string start_again(job_supervisor_state& st, recovery_in_progress& recovery, const std::vector<int>& nodes,
                        FailureKind kind, std::string& why_not);

}  // namespace troupe::actors::supervision
