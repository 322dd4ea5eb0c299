#pragma once
// The job supervisor: the root of the supervision tree, in the job process. Node processes join
// it; once every node of the plan has joined it tells them all to start, and it ends the job
// when every node is done, when one fails, or when one is lost.
//
// Its phases are behaviours, switched with become(); ended is quitting. A lost node's down_msg
// goes to CAF's one down handler, which asks the phase. Exit codes and failure kinds
// (failure_kind.hpp) in parentheses.
//
//   ┌─────────┐  every planned node joined:                ┌─────────┐
//   │ joining │  start_msg to every node, watchdog armed   │ running │
//   │         │ ─────────────────────────────────────────► │         │
//   └─────────┘                                            └─────────┘
//     │ join refused (wrong token, index taken or           │ every node done ─► ended (0)
//     │   unknown, wrong slots): logged, stays              │ watchdog, no progress ─► ended (1, stall)
//     │ join deadline ─► ended (2, join_timeout)            │ a node lost (node_lost), a node's failure
//     │ a node lost ─► ended (1, node_lost)                 │   after 0.5 s to settle (worker_exception)
//     │ a node's failure, settled ─►                        │   or a silent node (hang):
//     │   ended (1, worker_exception)                       │   · no rescue_timeout ─► ended (1, kind)
//                                                           │   · a pipeline stage without a surviving replica
//                                                           │       ─► ended (1, kind) "; no rescue snapshot (…)"
//                                                           │   · else rescue_msg to every survivor, timer armed
//                                                           ▼
//                                                      ┌──────────┐
//                                                      │ rescuing │
//                                                      └──────────┘
//       every writer's rescue_done_msg, one step ─► ended (1, kind, rescued_step) "; rescue snapshot of step N written"
//       a writer's error, its node failed or lost, steps differ, the timer ─► ended (1, kind) "; no rescue snapshot
//       (…)" another node done, failed or lost: recorded, stays (the watchdog is off)
//
//   running ─► recovering and back: the in-place recovery and grow protocol (recovery_coordinator.hpp
//   draws it; the files: job_supervisor.cpp the phases here, recovery_coordinator.cpp recovering,
//   supervisor_reports.cpp how nodes and ranks are named). In short:
//   running: with recovery in place (recovery_path.hpp), a node's worker_failed_msg ─► recover_msg
//     to every node (the failed worker respawned in its process, the others give up their step);
//     every rank's recover_ready_msg ─► recover_plan_msg to each (per stage and shard a donor);
//     every rank's recover_done_msg ─► "recovery: in place done ...", running on. A node lost or
//     silent, or every node of a host that became unreachable (recovery_path.hpp: the launcher
//     started them) ─► plan.replace_nodes (a new process for each; a silent one killed) and
//     recover_msg to every other node; each new process's join is accepted as a replacement, and
//     once all joined, start_msg with recover_msg to each (their workers join as replacements);
//     recover_plan_msg names their new addresses. A node lost or silent while such a recovery
//     still waits for its ranks (no plan made, no new process started) widens it: its process is
//     started again too, and the plan waits for it. DiLoCo islands lost whole: island_coordinator.hpp
//     (islands_msg to the other nodes, the lost nodes' processes started again to rejoin at the
//     next sync; recovering until they did). Where in place
//     does not apply, a failure during it, or its timeout ─► "recovery: restarting every node:
//     <why>" and the failure goes the way above (the node's failure, then rescuing or ended).
//   running, rescuing: a node lost or silent once every rank finished the last step ─► ended (0)
//   any phase: a node with the job's token but another build or config ─► ended (2, rejected);
//              the shell's drain of node N ─► ended (1, drained, drop_nodes {N});
//              the shell's rejoin ─► running, where in place grows (recovery_path.hpp's
//                choose_grow, and no recovery in progress): plan.grow_nodes starts the nodes left
//                out, recover_msg with grown_world to every node (the survivors give up their step,
//                grow their group and split the batch anew), the new processes join as
//                replacements do and receive their state from a survivor; once all are done,
//                the grown start_msg to every node and plan.grew(); a failure on the way ─►
//                ended (1, rejoin); elsewhere ─► ended (1, rejoin: the nodes left out come back);
//              heartbeats, the monitor's view and pause are answered; a timer or a late answer
//              that an earlier phase left behind is dropped.
//   ended: stop_msg to every joined node, job_outcome_msg to the listener, quit.
//
// The monitor actor (monitor_actor.hpp) asks for a view of every node (view_atom) and says when
// the shell has paused the job (pause_atom): while paused the step watchdog is off, and after a
// resume it counts a worker's idle time from the resume.
//
// With a rescue_timeout, a failure while running (a node lost, failed or silent; not a stall,
// which names no culprit) first goes through rescuing: rescue_msg to every surviving node naming
// one surviving rank per pipeline stage as its writer; each writer saves its memory of the last
// completed step as a checkpoint and answers rescue_done_msg. Every writer done with one step ─►
// ended (1) with rescued_step; a writer failed, lost or silent past the timeout, or a stage with
// no survivor ─► ended (1) without one (the restart falls back to the newest checkpoint).
//
// A lost node is a down_msg from its node supervisor: CAF 0.17 has no node_down_msg, a dead
// process shows up as exit_reason::remote_link_unreachable within milliseconds. A hung process
// keeps its connection open, so while running the watchdog also checks every node that is not
// done: no heartbeat for heartbeat_timeout (unreachable, stopped or wedged), or no progress for
// step_timeout (its worker is stuck). The report names each stalled rank and what it waits for —
// the message and peer, from the heartbeat — so a hang reads "rank 0 waits for collective message
// 3 ... from rank 1" and the rank that is computing rather than waiting stands out.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/job_events.hpp"
#include "actors/messages.hpp"
#include "actors/recovery_shape.hpp"

namespace troupe::actors {

struct PlannedNode {
  int node_index = 0;
  std::string host;
  int slots = 1;
  int first_rank = 0;
};

// A node JobPlan::replace_nodes is to start again, and the MFU basis its lost process measured
// (join_msg::peak_flops, 0: none), for the new one to take.
struct NodeToReplace {
  int node_index = -1;
  std::int64_t peak_flops = 0;
};

// Where JobPlan::replace_nodes starts one node's new process, and whether that is a spare line of
// the host file.
struct NodeReplacement {
  int node_index = -1;
  std::string host;
  bool spare = false;
};

// Every node's, in the order asked; or none started, and `why_not` says why.
struct NodeReplacements {
  std::vector<NodeReplacement> nodes;
  std::string why_not;
};

// The nodes JobPlan::grow_nodes started for an in-place grow, numbered after the job's (each node
// index the next, its first rank the next), how each replica splits the global batch in the grown
// job, and the grown job's config hash (its nodes were started with that configuration); or none
// started and `why_not` says why.
struct GrownNodes {
  std::vector<PlannedNode> nodes;
  int batch_size = 0;
  int grad_accum = 0;
  std::vector<double> replica_speeds;  // under train.balance, every replica's of the grown job; empty: even
  std::uint64_t config_hash = 0;
  std::string why_not;
};

struct JobPlan {
  std::string token;
  std::string build_id;
  std::uint64_t config_hash = 0;
  std::vector<PlannedNode> nodes;  // node_index = position
  std::chrono::milliseconds join_timeout{60000};
  std::chrono::milliseconds heartbeat_timeout{10000};
  std::chrono::milliseconds step_timeout{0};  // 0: no step watchdog
  int pipeline_stages = 1;  // > 1: reports name a node's pipeline stage and replica too
  int tensor_shards = 1;    // > 1: reports name a node's tensor shard and replica too
  // > 0: after a node is lost, fails or hangs while running, the survivors are asked for a rescue
  // snapshot (one surviving replica per stage and shard writes its memory of the last completed step as a
  // checkpoint) and given this long before the job ends; 0: the job ends at once.
  std::chrono::milliseconds rescue_timeout{0};
  // train.steps: a node lost or silent once every rank has finished this step (its heartbeat
  // said so, or its node or every other node reported success) ends the job as finished; 0: not
  // known.
  std::int64_t last_step = 0;
  // fault.recovery and the job's shape: whether a failure while running recovers in place
  // (recovery_path.hpp); mode restart, the default here, never does. An in-place recovery not
  // complete within recovery_timeout falls back to restarting every node.
  RecoveryShape recovery;
  std::chrono::milliseconds recovery_timeout{60000};
  std::function<void()> on_start;  // called once when every node has joined and the job starts
  // Starts each given node's process again (SIGKILL to the old one first, if it is still there),
  // for an in-place recovery of a lost or silent node, or on a spare host of the host file for
  // unreachable ones, a spare line each (their old processes left where they are); called on the
  // supervisor's thread. All or none: where one cannot be placed (no spare line left for it),
  // nothing starts. Empty where nothing can (the nodes started elsewhere): such a failure restarts
  // every node. `in_place` lists the failure kind of every in-place recovery of this attempt, this
  // one (node_lost, hang or unreachable) last: the new processes start their counts there. A new
  // process that exits before it joins is reported to the supervisor as (recover_atom, node_index,
  // how it exited). `attempt` is the new processes' (TROUPE_ATTEMPT), the job's next.
  std::function<NodeReplacements(const std::vector<NodeToReplace>& nodes, int attempt,
                                 const std::vector<FailureKind>& in_place)>
      replace_nodes;
  // The shell's rejoin while running, where in place grows (recovery_path.hpp's choose_grow):
  // starts the processes of the nodes the job went on without, as the job's attempt `attempt`,
  // and says which they are; called on the supervisor's thread. Empty: a rejoin ends the attempt
  // and the launcher grows the job by a restart. `grew` is called once they all took part in a
  // step boundary's recovery and the job runs grown: the launcher's next attempt, should there be
  // one, is the grown job.
  std::function<GrownNodes(int attempt)> grow_nodes;
  std::function<void()> grew;
  // Stops every node process the launcher runs (the job ended while one it started again in place
  // had not joined: no stop_msg reaches that one). Empty: nothing to stop.
  std::function<void(const std::string& reason)> stop_nodes;
  // The job's attempt when this supervisor starts (every node's TROUPE_ATTEMPT): a restart of the
  // job and an in-place replacement of a node each begin a new one. A join or message from a
  // process of an older attempt than its node's is refused (docs/protocols/control-plane.md).
  int attempt = 0;
  // Where the supervisor says what happened (job_events.hpp); null: nowhere. It outlives the
  // supervisor (the job runner's, across attempts).
  JobEvents* events = nullptr;
  // How this attempt's ranks got their state when they report a resume: the restart the job runner
  // chose (restart_from_replica, restart_from_checkpoint, shrink, grow_by_restart), or a fresh job
  // told to resume (restart_from_checkpoint).
  RecoveryRoute start_route = RecoveryRoute::restart_from_checkpoint;
};

// Spawns the job supervisor; `listener` receives one job_outcome_msg when the job ends.
caf::actor spawn_job_supervisor(caf::actor_system& system, JobPlan plan, caf::actor listener);

}  // namespace troupe::actors
