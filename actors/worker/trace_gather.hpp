#pragma once
// One trace for a whole job: every rank's recorder ends up in the recorder of the group's first
// rank (position 0), which writes the file. Each rank's document (TraceRecorder::to_json) goes
// through the group's collectives: the lengths by an all-reduce, the text by an all-gather of
// equal, padded segments. Every rank of the group must call it, in the same order as its other
// collectives on `group`.

#include "actors/worker/mailbox_comm.hpp"
#include "comm/collectives.hpp"
#include "monitor/trace.hpp"

namespace troupe::actors {

Status gather_trace(MailboxComm& mailbox, comm::Communicator& group, monitor::TraceRecorder& recorder);

}  // namespace troupe::actors
