#pragma once
// Collectives posted by a worker actor whose completions come back to it as messages
// (comm_done_msg in its mailbox), as DESIGN.md's data plane has it: the comm engine's progress
// thread sends the message when an operation ends, and the worker — a blocking actor, so heavy
// compute never runs on a scheduler thread — receives completions only when it needs a result,
// computing meanwhile. Its mailbox also brings stop requests: a stop that arrives while the
// worker waits ends the wait with WorkStopped.
//
// One MailboxCollectives per worker actor and Communicator; used from the worker's thread only.

#include <cstdint>
#include <set>
#include <stdexcept>

#include <caf/all.hpp>

#include "comm/collectives.hpp"
#include "compute/expected.hpp"
#include "compute/tensor.hpp"

namespace troupe::actors {

// The job asked this worker to stop while it waited (stop_msg's reason as what()).
class WorkStopped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class MailboxCollectives {
 public:
  using Operation = std::uint64_t;

  MailboxCollectives(caf::blocking_actor* self, comm::Communicator& comm);

  // Post and return at once (the buffer is kept alive by the operation).
  Operation all_reduce(compute::Tensor buffer);
  Operation reduce_scatter(compute::Tensor buffer);
  Operation all_gather(compute::Tensor buffer);

  // Receives completions until every operation posted so far is done; the first failure among
  // them. Throws WorkStopped when a stop request arrives first.
  Status wait_all();

  comm::Communicator& communicator() { return comm_; }

 private:
  comm::Callback completion_message(Operation op);

  caf::blocking_actor* self_;
  comm::Communicator& comm_;
  Operation next_ = 1;
  std::set<Operation> in_flight_;
};

}  // namespace troupe::actors
