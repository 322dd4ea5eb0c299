// An engine's sends and receives in flight: issued to UCX on the progress thread, completed by
// its callbacks, and handed their outcome (with the failed peer's name when one failed).
#include <cstdio>
#include <utility>

#include "comm/engine_state.hpp"

namespace troupe::comm {

std::string describe(const PendingReceive& wait, std::chrono::steady_clock::time_point now) {
  const char* kind = wait.key.kind == MessageKind::collective ? "collective" : "point-to-point";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", std::chrono::duration<double>(now - wait.posted).count());
  return std::string(kind) + " message " + std::to_string(wait.key.index) + " of operation " +
         std::to_string(wait.key.sequence) + " in group " + std::to_string(wait.key.group) + " (" +
         std::to_string(wait.bytes) + " bytes) from " + rank_name(wait.peer) + ", waiting " + seconds + " s";
}

void Engine::State::on_send_done(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<Operation*>(user_data);
  op->request = nullptr;
  op->state->completions.push_back({op->id, status, op->bytes});
  ucp_request_free(request);
}

void Engine::State::on_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
  auto* op = static_cast<Operation*>(user_data);
  op->request = nullptr;
  op->state->completions.push_back({op->id, status, status == UCS_OK ? info->length : 0});
  ucp_request_free(request);
}

Engine::State::Operation& Engine::State::add_operation(RequestId id, int peer, bool recv, const MessageKey& key,
                                                       std::size_t bytes, Callback done) {
  auto [it, inserted] = operations.try_emplace(id);
  TROUPE_CHECK(inserted, "request id reused");
  Operation& op = it->second;
  op.state = this;
  op.id = id;
  op.peer = peer;
  op.recv = recv;
  op.point_to_point = key.kind == MessageKind::point_to_point;
  op.bytes = bytes;
  op.posted = std::chrono::steady_clock::now();
  op.done = std::move(done);
  return op;
}

// Whether `op` can go to UCX; if not, its failure is queued as a completion.
bool Engine::State::can_issue(const Operation& op) {
  const Peer& peer = *peers[op.peer];
  if (stopping) {
    completions.push_back({op.id, UCS_ERR_CANCELED, 0});
    return false;
  }
  if (peer.failed) {
    completions.push_back({op.id, UCS_ERR_CONNECTION_RESET, 0});
    return false;
  }
  if (peer.ep == nullptr) {
    completions.push_back({op.id, UCS_ERR_NOT_CONNECTED, 0});
    return false;
  }
  return true;
}

void Engine::State::track(Operation& op, ucs_status_ptr_t result, std::size_t immediate_length) {
  if (result == nullptr) {
    completions.push_back({op.id, UCS_OK, immediate_length});
  } else if (UCS_PTR_IS_ERR(result)) {
    completions.push_back({op.id, UCS_PTR_STATUS(result), 0});
  } else {
    op.request = result;
  }
}

void Engine::State::issue_send(RequestId id, int peer, const MessageKey& key, const void* data, std::size_t bytes,
                               bool token, Callback done) {
  connect_on_first_use(peer);
  Operation& op = add_operation(id, peer, false, key, bytes, std::move(done));
  if (!can_issue(op)) return;
  if (wire && peer != rank) wire_clock.spend(wire->seconds(peer, bytes));
  std::size_t wire_bytes = bytes;
  if (token) {
    op.token = true;
    op.token_bytes = bytes;
    data = &op.token_bytes;
    wire_bytes = sizeof op.token_bytes;
  }
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = on_send_done;
  param.user_data = &op;
  track(op, ucp_tag_send_nbx(peers[peer]->ep, data, wire_bytes, tag_encode(key, rank), &param), bytes);
}

void Engine::State::issue_recv(RequestId id, int peer, const MessageKey& key, void* data, std::size_t bytes, bool token,
                               Callback done) {
  connect_on_first_use(peer);
  Operation& op = add_operation(id, peer, true, key, bytes, std::move(done));
  std::size_t wire_bytes = bytes;
  if (token) {
    op.token = true;
    data = &op.token_bytes;
    wire_bytes = sizeof op.token_bytes;
  }
  {
    std::lock_guard lock(pending_mutex);
    pending_receives.emplace(id, PendingReceive{peer, key, bytes, std::chrono::steady_clock::now()});
  }
  if (!can_issue(op)) return;
  ucp_request_param_t param{};
  // Always through the callback: UCX 1.13 reports length 0 for a receive it completes at once.
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = on_recv_done;
  param.user_data = &op;
  track(op, ucp_tag_recv_nbx(worker, data, wire_bytes, tag_encode(key, peer), ~std::uint64_t{0}, &param), 0);
}

Status Engine::State::outcome(const Operation& op, const Completion& c) const {
  const std::string what = (op.recv ? "receive from " : "send to ") + rank_name(op.peer);
  if (c.status == UCS_OK) {
    // A token receive holds the size its sender stood for; a message with bytes it cannot take.
    const std::size_t length = !op.recv || !op.token               ? c.length
                               : c.length == sizeof op.token_bytes ? static_cast<std::size_t>(op.token_bytes)
                                                                   : c.length;
    if (length == op.bytes) return {};
    return Error{"comm: " + what + ": expected " + std::to_string(op.bytes) + " bytes, got " + std::to_string(length)};
  }
  const Peer& peer = *peers[op.peer];
  if (peer.failed) return Error{peer.failure.message + " during a " + what};
  if (stopping) return Error{"comm: " + what + " ended: the engine of " + rank_name(rank) + " stopped"};
  if (c.status == UCS_ERR_NOT_CONNECTED)
    return Error{"comm: " + what + ": " + rank_name(op.peer) + " is not connected"};
  if (c.status == UCS_ERR_CANCELED) return Error{"comm: " + what + " cancelled"};
  return Error{"comm: " + what + " failed: " + ucs_status_string(c.status)};
}

// Hands `op` its outcome, once: the one place an operation leaves the in-flight count.
void Engine::State::complete(Operation& op, Status status) {
  traffic->requests_in_flight.fetch_sub(1, std::memory_order_relaxed);
  if (status && op.point_to_point)
    traffic->finished(op.recv ? TrafficKind::recv : TrafficKind::send, op.bytes,
                      std::chrono::steady_clock::now() - op.posted);
  std::exchange(op.done, nullptr)(std::move(status));
}

// Failures, then completions, until neither is left. Returns whether anything ran.
bool Engine::State::drain() {
  bool worked = false;
  for (;;) {
    std::vector<PeerError> failed;
    {
      std::lock_guard lock(mutex);
      failed.swap(failed_peers);
    }
    for (const PeerError& e : failed)
      mark_failed(
          e.rank, e.ep,
          Error{"comm: " + rank_name(e.rank) + " lost (UCX endpoint error: " + ucs_status_string(e.status) + ")"});
    if (completions.empty() && failed.empty()) return worked;
    worked = true;
    std::vector<Completion> batch;
    batch.swap(completions);
    for (const Completion& c : batch) {
      auto it = operations.find(c.id);
      if (it == operations.end()) continue;
      Operation op = std::move(it->second);
      operations.erase(it);
      if (op.recv) {
        std::lock_guard lock(pending_mutex);
        pending_receives.erase(c.id);
      }
      if (op.done) complete(op, outcome(op, c));
    }
  }
}

}  // namespace troupe::comm
