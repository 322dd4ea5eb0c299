#include "actors/worker/node_rescue.hpp"

#include <algorithm>
#include <chrono>
#include <memory>

#include "actors/local_messages.hpp"
#include "actors/worker/mailbox_comm.hpp"

namespace troupe::actors {
namespace {

// How long a worker whose collective failed waits for the job's word: RescueTiming's
// worker_order_wait. Without an answer (the job process is gone too) the worker just fails. The
// word may also be an in-place recovery's order (the lost peer's node process is started again):
// thrown as RecoveryOrdered, as the order would have been in the wait that failed.
std::optional<actors::rescue_msg> wait_for_order(caf::blocking_actor* worker, std::chrono::milliseconds order_wait) {
  std::optional<actors::rescue_msg> order;
  std::optional<actors::recover_msg> recover;
  const auto deadline = std::chrono::steady_clock::now() + order_wait;
  for (bool over = false; !over;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    worker->receive(
        // Completions of the failed step's operations: nothing waits for them any more.
        [](actors::comm_done_atom, const actors::comm_done_msg&) {},
        [&](actors::rescue_atom, const actors::rescue_msg& m) {
          order = m;
          over = true;
        },
        [&](actors::recover_atom, const actors::recover_msg& m) {
          recover = m;
          over = true;
        },
        [&](actors::stop_atom, const actors::stop_msg&) { over = true; },
        caf::after(std::max(left, std::chrono::milliseconds(0))) >> [&] { over = true; });
  }
  if (recover) throw actors::RecoveryOrdered(std::move(*recover));
  return order;
}

}  // namespace

RescueHooks node_rescue_hooks(caf::blocking_actor* worker, int rank, const RescueTiming& timing) {
  auto reply_to = std::make_shared<caf::actor>();
  RescueHooks hooks;
  hooks.role = [worker, rank, reply_to, timing](std::exception_ptr failure) -> std::optional<RescueRole> {
    std::optional<actors::rescue_msg> order;
    try {
      std::rethrow_exception(failure);
    } catch (const actors::RescueRequested& requested) {
      order = requested.order();
    } catch (const actors::CommFailed&) {
      order = wait_for_order(worker, timing.worker_order_wait);
    } catch (const RescueAtBoundary&) {
      order = wait_for_order(worker, timing.worker_order_wait);
    } catch (...) {
      // A plain stop, or the step's own failure (its state may be half updated): no rescue here.
    }
    if (!order) return std::nullopt;
    const auto it = std::find(order->writers.begin(), order->writers.end(), rank);
    if (it == order->writers.end()) return std::nullopt;
    *reply_to = order->reply_to;
    return RescueRole{static_cast<int>(it - order->writers.begin()), static_cast<int>(order->writers.size()),
                      timing.commit_timeout};
  };
  hooks.done = [worker, rank, reply_to](long steps_done, const Status& written) {
    // Sent by the worker itself, so it reaches the node supervisor before the worker's failure.
    worker->send(*reply_to, actors::rescue_atom_v,
                 actors::rescue_done_msg{rank, steps_done, written ? std::string{} : written.error().message});
  };
  return hooks;
}

}  // namespace troupe::actors
