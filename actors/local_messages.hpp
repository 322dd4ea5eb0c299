#pragma once
// Node-local messages: they pass between actors of one process and never cross the network, so
// they stay out of the wire catalogue (messages.hpp). They still get type IDs (CAF checks every
// message type), in a block of their own that starts where the catalogue's ends.

#include <cstdint>
#include <string>

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

}  // namespace troupe::actors

CAF_BEGIN_TYPE_ID_BLOCK(troupe_local, caf::id_block::troupe::end)
  CAF_ADD_TYPE_ID(troupe_local, (troupe::actors::comm_done_msg))
  CAF_ADD_ATOM(troupe_local, troupe::actors, comm_done_atom, "comm_done")
CAF_END_TYPE_ID_BLOCK(troupe_local)
