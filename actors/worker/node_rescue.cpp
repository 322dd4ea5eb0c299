#include "actors/worker/node_rescue.hpp"

#include <algorithm>
#include <chrono>
#include <memory>

#include "actors/local_messages.hpp"
#include "actors/worker/mailbox_comm.hpp"

namespace troupe::actors {
namespace {

// How long a worker whose collective failed waits for the job's word. The job answers within its
// rescue timeout; without an answer (the job process is gone too) the worker just fails.
constexpr auto order_wait = std::chrono::seconds(65);

std::optional<actors::rescue_msg> wait_for_order(caf::blocking_actor* worker) {
  std::optional<actors::rescue_msg> order;
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
        [&](actors::stop_atom, const actors::stop_msg&) { over = true; },
        caf::after(std::max(left, std::chrono::milliseconds(0))) >> [&] { over = true; });
  }
  return order;
}

}  // namespace

RescueHooks node_rescue_hooks(caf::blocking_actor* worker, int rank) {
  auto reply_to = std::make_shared<caf::actor>();
  RescueHooks hooks;
  hooks.role = [worker, rank, reply_to](std::exception_ptr failure) -> std::optional<RescueRole> {
    std::optional<actors::rescue_msg> order;
    try {
      std::rethrow_exception(failure);
    } catch (const actors::RescueRequested& requested) {
      order = requested.order();
    } catch (const actors::CommFailed&) {
      order = wait_for_order(worker);
    } catch (const RescueAtBoundary&) {
      order = wait_for_order(worker);
    } catch (...) {
      // A plain stop, or the step's own failure (its state may be half updated): no rescue here.
    }
    if (!order) return std::nullopt;
    const auto it = std::find(order->writers.begin(), order->writers.end(), rank);
    if (it == order->writers.end()) return std::nullopt;
    *reply_to = order->reply_to;
    return RescueRole{static_cast<int>(it - order->writers.begin()), static_cast<int>(order->writers.size())};
  };
  hooks.done = [worker, rank, reply_to](long steps_done, const Status& written) {
    // Sent by the worker itself, so it reaches the node supervisor before the worker's failure.
    worker->send(*reply_to, actors::rescue_atom_v,
                 actors::rescue_done_msg{rank, steps_done, written ? std::string{} : written.error().message});
  };
  return hooks;
}

}  // namespace troupe::actors
