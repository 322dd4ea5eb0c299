#pragma once
// The node supervisor: one per node process. It joins the job supervisor, waits for the start
// message that names every peer, runs this node's work in a worker actor, beats a heartbeat to
// the job while it works, and reports how the work ended. It watches the job supervisor: if the
// job process goes away, the node stops rather than waiting forever.
//
//   joining ──accepted──► waiting ──start_msg──► working ──work returns──► (node_done_msg to job)
//      │ rejected ─► ended (2)         │            │ heartbeat_msg to the job every interval
//      │                               │            │
//      │                               └── stop_msg / job lost ──► stop_msg to the worker; ended (stop code / 1)
//   ended: job_outcome_msg to the listener, quit.
//
// The worker is a blocking actor on its own thread: heavy compute never stalls the scheduler,
// and its mailbox receives comm completions (see mailbox_comm.hpp) and the stop request,
// which it honours at its next wait.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "monitor/work_progress.hpp"

namespace troupe::actors {

// What this node does once the job starts. `worker` is the actor it runs in (its mailbox gets
// comm completions and stop requests); `progress` is what the heartbeat reports. Its result goes
// to the job supervisor as this node's node_done_msg.
using NodeWork =
    std::function<node_done_msg(const start_msg&, caf::blocking_actor* worker, monitor::WorkProgress& progress)>;

struct NodeOptions {
  std::chrono::milliseconds heartbeat_interval{1000};
  // Describes what the data plane waits for (the engine's oldest receive), for the heartbeat.
  std::function<std::string()> oldest_receive;
};

// `hello` is the join message to send (its `node` field is filled in here). `listener` receives
// one job_outcome_msg when this node is finished.
caf::actor spawn_node_supervisor(caf::actor_system& system, caf::actor job, join_msg hello, NodeWork work,
                                 NodeOptions options, caf::actor listener);

}  // namespace troupe::actors
