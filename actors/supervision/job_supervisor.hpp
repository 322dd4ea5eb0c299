#pragma once
// The job supervisor: the root of the supervision tree, in the job process. Node processes join
// it; once every node of the plan has joined it tells them all to start, and it ends the job
// when every node is done, when one fails, or when one is lost.
//
//            join (accepted)            all joined: start_msg to every node
//   joining ───────────────► joining ─────────────────────────────────► running
//     │  join rejected: wrong token,                                       │
//     │  node index taken or unknown ─► logged, job goes on                │ all done ─► finished (0)
//     │  the job's token, other build or config ─► failed (2)              │ node_done != 0, then 0.5 s
//     │                                                                    │   with no node lost ─► failed (1)
//     │ join deadline passed ─► failed (2)                                 │ node lost ─► failed (1)
//     └────────── node lost ─► failed (1)                                  │ watchdog ─► failed (1)
//   finished / failed: stop_msg to every joined node, job_outcome_msg to the listener, quit.
//
// The monitor actor (monitor_actor.hpp) asks for a view of every node (view_atom) and says when
// the shell has paused the job (pause_atom): while paused the step watchdog is off, and after a
// resume it counts a worker's idle time from the resume.
//
// With a rescue_timeout, a failure while running (a node lost, failed or silent; not a stall,
// which names no culprit) first goes through rescuing: rescue_msg to every surviving node naming
// one surviving rank per pipeline stage as its writer; each writer saves its memory of the last
// completed step as a checkpoint and answers rescue_done_msg. Every writer done with one step ─►
// failed (1) with rescued_step; a writer failed, lost or silent past the timeout, or a stage with
// no survivor ─► failed (1) without one (the restart falls back to the newest checkpoint).
//
// A lost node is a down_msg from its node supervisor: CAF 0.17 has no node_down_msg, a dead
// process shows up as exit_reason::remote_link_unreachable within milliseconds. A hung process
// keeps its connection open, so while running the watchdog also checks every node that is not
// done: no heartbeat for heartbeat_timeout (the process is stopped or wedged), or no progress for
// step_timeout (its worker is stuck). The report names each stalled rank and what it waits for —
// the message and peer, from the heartbeat — so a hang reads "rank 0 waits for collective message
// 3 ... from rank 1" and the rank that is computing rather than waiting stands out.

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/messages.hpp"

namespace troupe::actors {

struct PlannedNode {
  int node_index = 0;
  std::string host;
  int slots = 1;
  int first_rank = 0;
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
  // > 0: after a node is lost, fails or hangs while running, the survivors are asked for a rescue
  // snapshot (one surviving replica per stage writes its memory of the last completed step as a
  // checkpoint) and given this long before the job ends; 0: the job ends at once.
  std::chrono::milliseconds rescue_timeout{0};
  std::function<void()> on_start;  // called once when every node has joined and the job starts
};

// Spawns the job supervisor; `listener` receives one job_outcome_msg when the job ends.
caf::actor spawn_job_supervisor(caf::actor_system& system, JobPlan plan, caf::actor listener);

}  // namespace troupe::actors
