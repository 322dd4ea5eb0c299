#include "actors/mailbox_collectives.hpp"

#include <optional>
#include <string>

#include "actors/local_messages.hpp"

namespace troupe::actors {

MailboxCollectives::MailboxCollectives(caf::blocking_actor* self, comm::Communicator& comm)
    : self_(self), comm_(comm) {}

comm::Callback MailboxCollectives::completion_message(Operation op) {
  in_flight_.insert(op);
  // Runs on the engine's progress thread: anon_send is thread-safe and never blocks it.
  return [worker = caf::actor_cast<caf::actor>(self_), op](Status status) {
    caf::anon_send(worker, comm_done_atom_v, comm_done_msg{op, status ? std::string{} : status.error().message});
  };
}

MailboxCollectives::Operation MailboxCollectives::all_reduce(compute::Tensor buffer) {
  const Operation op = next_++;
  comm_.post_all_reduce(std::move(buffer), completion_message(op));
  return op;
}

MailboxCollectives::Operation MailboxCollectives::reduce_scatter(compute::Tensor buffer) {
  const Operation op = next_++;
  comm_.post_reduce_scatter(std::move(buffer), completion_message(op));
  return op;
}

MailboxCollectives::Operation MailboxCollectives::all_gather(compute::Tensor buffer) {
  const Operation op = next_++;
  comm_.post_all_gather(std::move(buffer), completion_message(op));
  return op;
}

Status MailboxCollectives::wait_all() {
  Status first_failure;
  std::optional<std::string> stop_reason;
  self_->receive_while([&] { return !in_flight_.empty() && !stop_reason; })(
      [&](comm_done_atom, const comm_done_msg& done) {
        TROUPE_CHECK(in_flight_.erase(done.operation) == 1, "completion of an operation not in flight");
        if (!done.error.empty() && first_failure) first_failure = Error{done.error};
      },
      [&](stop_atom, const stop_msg& stop) { stop_reason = stop.reason; });
  // Thrown here, not from the handler, so CAF's receive loop is left normally.
  if (stop_reason) throw WorkStopped(*stop_reason);
  return first_failure;
}

}  // namespace troupe::actors
