#pragma once
// The data plane as a worker actor uses it: collectives and point-to-point transfers posted to
// the comm engine, whose completions come back to the worker as messages (comm_done_msg in its
// mailbox), as docs/design.md's data plane has it. The engine's progress thread sends the message
// when an operation ends; the worker — a blocking actor, so heavy compute never runs on a
// scheduler thread — receives completions only when it needs a result, computing meanwhile.
// Its mailbox also brings stop requests: a stop that arrives while the worker waits ends the
// wait with WorkStopped, a rescue order with RescueRequested, an in-place recovery's order with
// RecoveryOrdered — unless the order says the failed rank completed the step this worker is in:
// every message of that step from it is then on its way, so the worker finishes the step (and any
// before the failed rank's last) and takes the order at the first wait or check after it. Were
// it to give the step up, the survivors would hold different steps and no replica might hold the
// newest (a rollback, or steps lost).
//
// One MailboxComm per worker actor; used from the worker's thread only. Every posted tensor is
// kept alive by its operation until the operation ends.

#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/messages.hpp"
#include "comm/collectives.hpp"
#include "comm/engine.hpp"
#include "compute/expected.hpp"
#include "compute/tensor.hpp"

namespace troupe::actors {

// The job asked this worker to stop while it waited (stop_msg's reason as what()).
class WorkStopped : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The job asked for a rescue snapshot while this worker waited (rescue_msg): the worker stops,
// and writes its state first when the order names its rank.
class RescueRequested : public WorkStopped {
 public:
  explicit RescueRequested(rescue_msg order) : WorkStopped("rescue: " + order.reason), order_(std::move(order)) {}
  const rescue_msg& order() const { return order_; }

 private:
  rescue_msg order_;
};

// The job recovers in place while this worker waited (recover_msg): the worker gives up its step
// and takes part in the recovery (in_place_recovery.hpp). Not a stop: the worker goes on after it.
class RecoveryOrdered : public std::runtime_error {
 public:
  // `finished_step_first`: the order came while the worker was in a step the failed rank had
  // completed, and was taken once the worker had finished it.
  explicit RecoveryOrdered(recover_msg order, bool finished_step_first = false)
      : std::runtime_error("in-place recovery: " + order.reason),
        order_(std::move(order)),
        finished_step_first_(finished_step_first) {}
  const recover_msg& order() const { return order_; }
  bool finished_step_first() const { return finished_step_first_; }

 private:
  recover_msg order_;
  bool finished_step_first_;
};

// A collective or transfer failed (a peer was lost). Thrown only from waits that come before
// the step's optimizer update, so the worker's state is still that of its last completed step.
class CommFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The one way a failed collective or transfer becomes CommFailed: throws it with the error's
// message when `result` (a Status, or an Expected) failed, else nothing.
template <class Result>
void check_comm(const Result& result) {
  if (!result) throw CommFailed(result.error().message);
}

class MailboxComm {
 public:
  using Operation = std::uint64_t;

  explicit MailboxComm(caf::blocking_actor* self) : self_(self) {}

  // The worker actor whose mailbox this is.
  caf::blocking_actor* worker() const { return self_; }

  // Post and return at once.
  Operation all_reduce(comm::Communicator& comm, compute::Tensor buffer);
  Operation reduce_scatter(comm::Communicator& comm, compute::Tensor buffer);
  Operation all_gather(comm::Communicator& comm, compute::Tensor buffer);
  // Over caller-chosen segments (Communicator's uneven forms).
  Operation reduce_scatter(comm::Communicator& comm, compute::Tensor buffer, std::vector<comm::Slice> segments);
  Operation all_gather(comm::Communicator& comm, compute::Tensor buffer, std::vector<comm::Slice> segments);
  Operation send(comm::Engine& engine, int peer, const comm::MessageKey& key, compute::Tensor buffer);
  Operation recv(comm::Engine& engine, int peer, const comm::MessageKey& key, compute::Tensor buffer);

  // Receives completions until `op` is done; its outcome. Throws WorkStopped on a stop request
  // (RescueRequested on a rescue order), RecoveryOrdered on an in-place recovery's order.
  Status wait(Operation op);
  // The same for every operation posted so far, except those set apart; the first failure among them.
  Status wait_all();
  // Whether `op` is still in flight, after taking the messages already in the mailbox (an order
  // throws as in take_waiting_orders).
  bool in_flight(Operation op);
  // Sets `op` apart from wait_all(): only wait(op) waits for it and takes its outcome. For an
  // operation that stays in flight across other waits (DiLoCo's overlapped outer sums).
  void set_apart(Operation op) { apart_.insert(op); }
  // Takes at most one message, waiting up to `limit` for it: a completion is noted, a stop
  // request or rescue order throws as the waits do. For a worker waiting on something that sends
  // no message (a device stream), so orders still reach it.
  void take_orders(std::chrono::microseconds limit);
  // Gives up every send and receive in flight (an abandoned step's): the engine is asked to cancel
  // them and their completions, whenever they come, are dropped. A receive's late message, if it
  // still lands, lands in a buffer its operation keeps alive and nobody reads; its key (an epoch's
  // group id) matches no later operation.
  void abandon_transfers();
  // Waits for every operation in flight to end, whatever the outcome (an abandoned step's); a
  // stop still throws.
  void drain();
  // Takes every message already in the mailbox without waiting: completions are noted, an order
  // throws as the waits do. For a worker still computing its step, so that a recovery or rescue
  // order reaches it before its next wait; only where its state is still its last completed step's.
  void take_waiting_orders();
  // DiLoCo's islands left out and rejoining (islands_msg, island_membership.hpp): the orders are
  // kept as they come, in order, in any wait. Waits until `op` is done or such an order is waiting:
  // whether `op` is done (wait(op) then takes its outcome at once).
  bool wait_or_islands_order(Operation op);
  // Waits until an islands order is waiting (a stop or rescue throws as in any wait).
  void wait_islands_order();
  // The oldest islands order not yet taken, if any.
  std::optional<islands_msg> take_islands_order();
  // The steps whose update the worker's state holds; set whenever that changes (a step done, a
  // resume), for the orders a step in flight finishes first.
  void holds_steps(std::int64_t steps_done) { steps_held_ = steps_done; }

 private:
  comm::Callback completion_message(Operation op);
  std::size_t in_flight_apart() const;  // operations set apart that are still in flight
  // A send or receive posted to `engine` as request `request`, for abandon_transfers().
  struct Transfer {
    comm::Engine* engine;
    comm::RequestId request;
  };
  // Receives messages while `pending()` holds, each wait at most `limit` long.
  template <class Pending>
  void receive_while(Pending pending, std::chrono::microseconds limit);

  caf::blocking_actor* self_;
  Operation next_ = 1;
  std::map<Operation, std::string> in_flight_;  // operation → empty
  std::map<Operation, std::string> finished_;   // completed but not yet waited for → error text
  std::map<Operation, Transfer> transfers_;     // sends and receives in flight
  std::set<Operation> abandoned_;               // given up, their completions still to come
  std::set<Operation> apart_;                   // waited for by wait(op) alone (set_apart)
  std::int64_t steps_held_ = 0;
  std::optional<recover_msg> after_step_;  // an order taken once the worker holds its failed_steps_done
  std::deque<islands_msg> islands_orders_;  // not yet taken
};

}  // namespace troupe::actors
