#pragma once
// Node-local messages: they pass between actors of one process and never cross the network, so
// they stay out of the wire catalogue (messages.hpp). They still get type IDs (CAF checks every
// message type), in a block of their own that starts where the catalogue's ends.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/messages.hpp"

namespace troupe::actors {

// The comm engine's progress thread → the worker actor that posted a collective or transfer: it is done.
struct comm_done_msg {
  std::uint64_t operation = 0;  // the number MailboxComm gave it
  std::string error;            // empty on success
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, comm_done_msg& x) {
  return f(caf::meta::type_name("comm_done_msg"), x.operation, x.error);
}

// Job supervisor → monitor actor (in the job process), the answer to view_atom: every planned
// node as the supervisor knows it now.
struct node_view {
  int node_index = -1;
  std::string host;
  int pid = 0;                     // 0 until joined
  caf::actor node;                 // its node supervisor; invalid until joined
  bool done = false;
  double heard_seconds_ago = -1;  // since its last heartbeat; -1 before the job runs
  std::vector<worker_beat> workers;  // by slot, from the last heartbeat
  std::vector<memory_beat> memory;   // from the last heartbeat
  std::int64_t resident_bytes = 0, peak_resident_bytes = 0;
};
struct job_view_msg {
  bool running = false;  // every node joined and the job started
  std::vector<node_view> nodes;  // by node index
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_view& x) {
  return f(caf::meta::type_name("node_view"), x.node_index, x.host, x.pid, x.node, x.done, x.heard_seconds_ago,
           x.workers, x.memory, x.resident_bytes, x.peak_resident_bytes);
}
// Launch → the attempt's monitor: the job grew in place (docs/launch.md, "Growing back"): its ranks
// now, whether each node (by index) runs on this machine, and the host-file lines still left out.
struct grown_msg {
  int world_size = 0;
  std::vector<bool> node_is_local;
  std::vector<std::string> left_out;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, grown_msg& x) {
  return f(caf::meta::type_name("grown_msg"), x.world_size, x.node_is_local, x.left_out);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_view_msg& x) {
  return f(caf::meta::type_name("job_view_msg"), x.running, x.nodes);
}

}  // namespace troupe::actors

CAF_BEGIN_TYPE_ID_BLOCK(troupe_local, caf::id_block::troupe::end)
  CAF_ADD_TYPE_ID(troupe_local, (troupe::actors::comm_done_msg))
  CAF_ADD_ATOM(troupe_local, troupe::actors, comm_done_atom, "comm_done")
  CAF_ADD_TYPE_ID(troupe_local, (troupe::actors::node_view))
  CAF_ADD_TYPE_ID(troupe_local, (std::vector<troupe::actors::node_view>))
  CAF_ADD_TYPE_ID(troupe_local, (troupe::actors::job_view_msg))
  CAF_ADD_ATOM(troupe_local, troupe::actors, view_atom, "view")
  CAF_ADD_ATOM(troupe_local, troupe::actors, pause_atom, "pause")
  CAF_ADD_ATOM(troupe_local, troupe::actors, drain_atom, "drain")
  CAF_ADD_ATOM(troupe_local, troupe::actors, rejoin_atom, "rejoin")
  CAF_ADD_ATOM(troupe_local, troupe::actors, unreachable_atom, "unreach")
  CAF_ADD_TYPE_ID(troupe_local, (troupe::actors::grown_msg))
  CAF_ADD_ATOM(troupe_local, troupe::actors, grown_atom, "grown")
CAF_END_TYPE_ID_BLOCK(troupe_local)
