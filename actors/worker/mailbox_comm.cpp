#include "actors/worker/mailbox_comm.hpp"

#include <optional>
#include <utility>

#include "actors/local_messages.hpp"

namespace troupe::actors {

comm::Callback MailboxComm::completion_message(Operation op) {
  in_flight_.emplace(op, std::string{});
  // Runs on the engine's progress thread: anon_send is thread-safe and never blocks it.
  return [worker = caf::actor_cast<caf::actor>(self_), op](Status status) {
    caf::anon_send(worker, comm_done_atom_v, comm_done_msg{op, status ? std::string{} : status.error().message});
  };
}

MailboxComm::Operation MailboxComm::all_reduce(comm::Communicator& comm, compute::Tensor buffer) {
  const Operation op = next_++;
  comm.post_all_reduce(std::move(buffer), completion_message(op));
  return op;
}

MailboxComm::Operation MailboxComm::reduce_scatter(comm::Communicator& comm, compute::Tensor buffer) {
  const Operation op = next_++;
  comm.post_reduce_scatter(std::move(buffer), completion_message(op));
  return op;
}

MailboxComm::Operation MailboxComm::all_gather(comm::Communicator& comm, compute::Tensor buffer) {
  const Operation op = next_++;
  comm.post_all_gather(std::move(buffer), completion_message(op));
  return op;
}

MailboxComm::Operation MailboxComm::reduce_scatter(comm::Communicator& comm, compute::Tensor buffer,
                                                   std::vector<comm::Slice> segments) {
  const Operation op = next_++;
  comm.post_reduce_scatter(std::move(buffer), std::move(segments), completion_message(op));
  return op;
}

MailboxComm::Operation MailboxComm::all_gather(comm::Communicator& comm, compute::Tensor buffer,
                                               std::vector<comm::Slice> segments) {
  const Operation op = next_++;
  comm.post_all_gather(std::move(buffer), std::move(segments), completion_message(op));
  return op;
}

MailboxComm::Operation MailboxComm::send(comm::Engine& engine, int peer, const comm::MessageKey& key,
                                         compute::Tensor buffer) {
  const Operation op = next_++;
  comm::Callback done = completion_message(op);
  const void* data = buffer.data();
  const auto bytes = static_cast<std::size_t>(buffer.nbytes());
  // The callback holds the tensor, so its bytes outlive the transfer.
  const bool token = buffer.moves_as_token();  // a token tensor's message carries its size alone
  comm::Callback finished = [keep = std::move(buffer), done = std::move(done)](Status s) { done(s); };
  const comm::RequestId request = token ? engine.post_token_send(peer, key, bytes, std::move(finished))
                                        : engine.post_send(peer, key, data, bytes, std::move(finished));
  transfers_[op] = {&engine, request};
  return op;
}

MailboxComm::Operation MailboxComm::recv(comm::Engine& engine, int peer, const comm::MessageKey& key,
                                         compute::Tensor buffer) {
  const Operation op = next_++;
  comm::Callback done = completion_message(op);
  void* data = buffer.data();
  const auto bytes = static_cast<std::size_t>(buffer.nbytes());
  const bool token = buffer.moves_as_token();
  comm::Callback finished = [keep = std::move(buffer), done = std::move(done)](Status s) { done(s); };
  const comm::RequestId request = token ? engine.post_token_recv(peer, key, bytes, std::move(finished))
                                        : engine.post_recv(peer, key, data, bytes, std::move(finished));
  transfers_[op] = {&engine, request};
  return op;
}

// How long wait() and wait_all() block between checks of what they wait for: they are woken by
// the completion they need, so this only bounds a wait that nothing would wake.
constexpr std::chrono::microseconds completion_wait_slice = std::chrono::seconds(1);

template <class Pending>
void MailboxComm::receive_while(Pending pending, std::chrono::microseconds limit) {
  std::optional<std::string> stop_reason;
  std::optional<rescue_msg> rescue;
  std::optional<recover_msg> recover;
  if (after_step_ && steps_held_ >= after_step_->failed_steps_done)
    throw RecoveryOrdered(*std::exchange(after_step_, std::nullopt), true);
  self_->receive_while([&] { return pending() && !stop_reason && !rescue && !recover; })(
      [&](comm_done_atom, const comm_done_msg& done) {
        if (abandoned_.erase(done.operation) > 0) return;
        transfers_.erase(done.operation);
        auto it = in_flight_.find(done.operation);
        TROUPE_CHECK(it != in_flight_.end(), "completion of an operation not in flight");
        in_flight_.erase(it);
        finished_.emplace(done.operation, done.error);
      },
      [&](stop_atom, const stop_msg& stop) { stop_reason = stop.reason; },
      [&](rescue_atom, const rescue_msg& order) { rescue = order; },
      [&](recover_atom, const islands_msg& order) { islands_orders_.push_back(order); },
      [&](recover_atom, const recover_msg& order) {
        if (order.failed_steps_done > steps_held_)
          after_step_ = order;
        else
          recover = order;
      },
      caf::after(limit) >> [] {});
  // Thrown here, not from the handler, so CAF's receive loop is left normally.
  if (rescue) throw RescueRequested(std::move(*rescue));
  if (recover) throw RecoveryOrdered(std::move(*recover));
  if (stop_reason) throw WorkStopped(*stop_reason);
}

Status MailboxComm::wait(Operation op) {
  receive_while([&] { return in_flight_.count(op) > 0; }, completion_wait_slice);
  auto it = finished_.find(op);
  TROUPE_CHECK(it != finished_.end(), "wait for an operation never posted or already waited for");
  const std::string error = std::move(it->second);
  finished_.erase(it);
  apart_.erase(op);
  if (error.empty()) return {};
  return Error{error};
}

Status MailboxComm::wait_all() {
  receive_while([&] { return in_flight_.size() > in_flight_apart(); }, completion_wait_slice);
  Status first_failure;
  for (auto it = finished_.begin(); it != finished_.end();) {
    if (apart_.count(it->first) > 0) {
      ++it;
      continue;
    }
    if (!it->second.empty() && first_failure) first_failure = Error{it->second};
    it = finished_.erase(it);
  }
  return first_failure;
}

bool MailboxComm::wait_or_islands_order(Operation op) {
  receive_while([&] { return in_flight_.count(op) > 0 && islands_orders_.empty(); }, completion_wait_slice);
  return in_flight_.count(op) == 0;
}

void MailboxComm::wait_islands_order() {
  receive_while([&] { return islands_orders_.empty(); }, completion_wait_slice);
}

std::optional<islands_msg> MailboxComm::take_islands_order() {
  if (islands_orders_.empty()) return std::nullopt;
  islands_msg order = std::move(islands_orders_.front());
  islands_orders_.pop_front();
  return order;
}

void MailboxComm::abandon_transfers() {
  for (const auto& [op, transfer] : transfers_) {
    // Engine::cancel() runs on the progress thread; a request already ended is no longer known there.
    transfer.engine->post([engine = transfer.engine, request = transfer.request] { engine->cancel(request); });
    in_flight_.erase(op);
    abandoned_.insert(op);
  }
  transfers_.clear();
}

void MailboxComm::drain() {
  receive_while([&] { return !in_flight_.empty(); }, completion_wait_slice);
  finished_.clear();
  apart_.clear();
}

std::size_t MailboxComm::in_flight_apart() const {
  std::size_t count = 0;
  for (Operation op : apart_) count += in_flight_.count(op);
  return count;
}

void MailboxComm::take_waiting_orders() {
  for (std::size_t noted = finished_.size() + 1; noted != finished_.size();) {
    noted = finished_.size();
    take_orders(std::chrono::microseconds(0));
  }
}

bool MailboxComm::in_flight(Operation op) {
  take_waiting_orders();
  return in_flight_.count(op) > 0;
}

void MailboxComm::take_orders(std::chrono::microseconds limit) {
  bool first = true;
  receive_while([&first] { return std::exchange(first, false); }, limit);
}

}  // namespace troupe::actors
