#pragma once
// The node supervisor: one per node process. It joins the job supervisor, waits for the start
// message that names every peer, runs this node's work off the scheduler threads, and reports
// how it ended. It watches the job supervisor: if the job process goes away, the node stops
// rather than waiting forever.
//
//   joining ──accepted──► waiting ──start_msg──► working ──work returns──► (node_done_msg to job)
//      │ rejected ─► ended (2)         │                       │
//      │                               └── stop_msg / job lost ┴──► ended (stop code / 1)
//   ended: job_outcome_msg to the listener, quit.

#include <functional>
#include <string>

#include <caf/all.hpp>

#include "actors/messages.hpp"

namespace troupe::actors {

// What this node does once the job starts; runs on its own thread (a detached actor), so it may
// block. Its result goes to the job supervisor as this node's node_done_msg.
using NodeWork = std::function<node_done_msg(const start_msg&)>;

// `hello` is the join message to send (its `node` field is filled in here). `listener` receives
// one job_outcome_msg when this node is finished.
caf::actor spawn_node_supervisor(caf::actor_system& system, caf::actor job, join_msg hello, NodeWork work,
                                 caf::actor listener);

}  // namespace troupe::actors
