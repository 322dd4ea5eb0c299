#pragma once
// The node supervisor: one per node process. It joins the job supervisor, waits for the start
// message that names every peer, runs this node's work in one worker actor per slot (the node's
// ranks first_rank … first_rank + slots − 1), beats a heartbeat to the job while they work, and
// reports how the work ended. It watches the job supervisor: if the job process goes away, the
// node stops rather than waiting forever.
//
// Its phases are behaviours, switched with become(); ended is quitting.
//
//   ┌─────────┐  start_msg: one worker per slot,  ┌─────────┐
//   │ joining │  heartbeat armed                  │ working │
//   │         │ ────────────────────────────────► │         │
//   └─────────┘                                   └─────────┘
//     │ join accepted: stays (the job sends       │ heartbeat_msg to the job every interval
//     │   start_msg before it answers the last    │ a worker fails ─► its node_done_msg to the job at once
//     │   node to join, so either may come first) │ every worker done ─► node_done_msg (0) to the job
//     │ join refused or unanswered in 30 s ─►     │ rescue_msg ─► to every worker; a writer's rescue_done_msg
//     │   ended (2)                               │   goes on to the job (before that worker's failure)
//                                                 │ with the job's fault.recovery in place (start_msg), a
//                                                 │   worker that threw ─► worker_failed_msg to the job
//                                                 │   instead, and the node waits
//                                                 │ recover_msg ─► the failed workers named respawned in
//                                                 │   this process (replacements); the order to every other worker
//
//   any phase: stop_msg ─► ended (the stop's code); the job supervisor lost ─► ended (1);
//              control_msg from the job process ─► NodeOptions::control, answered
//   ended: stop_msg to the workers, job_outcome_msg to the listener, quit.
//
// The job's monitor actor may send control orders (control_msg, only from the job process); the
// node passes them to NodeOptions::control, which its workers obey at their step boundaries.
//
// A worker is a blocking actor on its own thread: heavy compute never stalls the scheduler, and
// its mailbox receives comm completions (see mailbox_comm.hpp) and the stop request, which it
// honours at its next wait.

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "monitor/work_progress.hpp"

namespace troupe::actors {

// What the worker of `slot` does once the job starts, in every slot at once. `worker` is the
// actor it runs in (its mailbox gets comm completions and stop requests); `progress` is what the
// heartbeat reports; `replacing` is set when the worker is respawned in an in-place recovery. A
// failure goes to the job supervisor as this node's node_done_msg at once (or as a
// worker_failed_msg, see NodeOptions); success once every slot has succeeded.
using NodeWork = std::function<node_done_msg(const start_msg&, int slot, caf::blocking_actor* worker,
                                             monitor::WorkProgress& progress,
                                             const std::optional<recover_msg>& replacing)>;

struct NodeOptions {
  std::chrono::milliseconds heartbeat_interval{1000};
  // Describes what a slot's data plane waits for (its engine's oldest receive), for the heartbeat.
  std::function<std::string(int slot)> oldest_receive;
  // Told after each heartbeat goes to the job (the node's metrics count its age from there).
  std::function<void()> heartbeat_sent;
  // Obeys an order of the job's monitor actor (control_msg); unset: the node takes none.
  std::function<control_reply_msg(const control_msg&)> control;
  // Told of every in-place recovery the job went on after without restarting this node (its route
  // says where the state came from, its kind the failure it answered), for the node's metrics.
  std::function<void(const training_resumed&)> recovered;
};

// `hello` is the join message to send (its `node` field is filled in here); the node runs one
// worker per data-plane address it brings. `listener` receives one job_outcome_msg when this
// node is finished.
caf::actor spawn_node_supervisor(caf::actor_system& system, caf::actor job, join_msg hello, NodeWork work,
                                 NodeOptions options, caf::actor listener);

}  // namespace troupe::actors
