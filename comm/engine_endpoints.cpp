// An engine's endpoints: connect with its handshake, a peer's failure and what waits on it,
// retirement of a replaced peer, and watches on peers.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "comm/engine_state.hpp"
#include "compute/memory_ledger.hpp"

namespace troupe::comm {
namespace {

// The transports of an endpoint's lanes that carry messages, as "tl/device" ("tcp/eth0",
// "sysv/memory"), from UCX's own description of the endpoint: UCX 1.13 has no query for them.
// Its lane lines read "#  lane[0]:  4:sysv/memory.0 md[2]  -> md[2]/sysv/sysdev[255] am am_bw#0";
// the lanes marked "am" carry tag messages (rendezvous included, over TCP and shared memory).
std::string endpoint_transports(ucp_ep_h ep) {
  char* text = nullptr;
  std::size_t size = 0;
  FILE* stream = open_memstream(&text, &size);
  if (stream == nullptr) return "unknown";
  ucp_ep_print_info(ep, stream);
  std::fclose(stream);
  const std::string described(text, size);
  std::free(text);
  std::vector<std::string> found;
  for (std::size_t start = 0, end = 0; start < described.size(); start = end + 1) {
    end = std::min(described.find('\n', start), described.size());
    const std::string_view line(described.data() + start, end - start);
    const std::size_t lane = line.find("lane["), marks = line.find("->");
    if (lane == std::string_view::npos || marks == std::string_view::npos) continue;
    if (line.find(" am ", marks) == std::string_view::npos && !line.ends_with(" am")) continue;
    const std::size_t number = line.find(':', lane), name = line.find(':', number + 1);
    if (number == std::string_view::npos || name == std::string_view::npos) continue;
    std::string_view tl = line.substr(name + 1);
    tl = tl.substr(0, tl.find(' '));
    tl = tl.substr(0, tl.rfind('.'));  // "tcp/eth0.0": the ".0" counts UCX's paths to the device
    if (std::find(found.begin(), found.end(), tl) == found.end()) found.emplace_back(tl);
  }
  if (found.empty()) return "unknown";
  std::string joined;
  for (const std::string& tl : found) joined += (joined.empty() ? "" : ",") + tl;
  return joined;
}

}  // namespace

std::string rank_name(int rank) { return "rank " + std::to_string(rank); }

Error handshake_too_late(int peer, std::chrono::seconds limit) {
  return Error{"comm: cannot connect to rank " + std::to_string(peer) + ": it did not take the handshake within " +
               std::to_string(limit.count()) + " s"};
}
// Creates the endpoint, then sends the peer a handshake and waits until the peer has taken it.
// UCX 1.13 wires an endpoint up lazily: it asks the peer for the id of its endpoint only when a
// protocol first needs it (a rendezvous, a synchronous send). Until the answer comes, its
// keepalive skips the endpoint, so a peer that dies then is never noticed and the operation
// hangs; and a peer that dies while the answer to its own request is still queued here aborts
// this process (an assertion in ucp_request_send_state_ff, "got REP message"). Left lazy, that
// window opens at the first large message of the first collective; a synchronous send needs the
// id, so the handshake closes the window while connect() still waits for both processes.
void Engine::State::connect_now(int peer_rank, const EngineAddress& address, bool map, Callback done) {
  Status created = create_endpoint(peer_rank, address.worker);
  if (!created) return done(created);
  const ucp_ep_h ep = peers[peer_rank]->ep;
  auto finish = [this, peer_rank, ep, address, map, done = std::move(done)](ucs_status_t status) {
    Peer& peer = *peers[peer_rank];
    // Failed while connecting (given up, or lost), or connected again meanwhile.
    if (peer.failed) return done(Error{peer.failure.message});
    if (peer.ep != ep) return done(Error{"comm: " + rank_name(peer_rank) + " replaced by a new process"});
    peer.handshaking = false;
    if (status != UCS_OK) {
      Error failed = Error{"comm: cannot connect to " + rank_name(peer_rank) +
                           ": the handshake failed: " + ucs_status_string(status)};
      mark_failed(peer_rank, ep, failed);
      return done(std::move(failed));
    }
    peer.transports = endpoint_transports(ep);
    if (map) map_region(peer, address);
    done(Status{});
  };
  if (peer_rank == rank) return finish(UCS_OK);
  peers[peer_rank]->handshaking = true;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  param.cb.send = on_handshake_sent;
  auto* pending = new HandshakeDone(std::move(finish));
  param.user_data = pending;
  const ucs_status_ptr_t request =
      ucp_tag_send_sync_nbx(ep, nullptr, 0, tag_encode(MessageKey{MessageKind::handshake}, rank), &param);
  if (request == nullptr || UCS_PTR_IS_ERR(request)) {
    std::unique_ptr<HandshakeDone> callback(pending);
    (*callback)(request == nullptr ? UCS_OK : UCS_PTR_STATUS(request));
  }
}

void Engine::State::on_handshake_sent(void* request, ucs_status_t status, void* user_data) {
  std::unique_ptr<HandshakeDone> callback(static_cast<HandshakeDone*>(user_data));
  ucp_request_free(request);
  (*callback)(status);
}

// Learns the address of `peer_rank` (engine.hpp, introduce()): the same address is nothing new; another
// one replaces the peer as connect() does, and the new one is connected on first use.
void Engine::State::introduce_now(int peer_rank, std::vector<std::uint8_t> address) {
  Peer& peer = *peers[peer_rank];
  if (peer_rank == rank || peer.known == address) return;
  if (peer.ep != nullptr || peer.failed) retire(peer_rank);
  peer.known = std::move(address);
}

// An introduced peer without an endpoint gets one when an operation first names it: connect()'s
// handshake, without mapping the peer's region. The progress loop gives up on it after
// TROUPE_COMM_HANDSHAKE_S, as connect() does.
void Engine::State::connect_on_first_use(int peer_rank) {
  Peer& peer = *peers[peer_rank];
  if (stopping || peer.ep != nullptr || peer.failed || peer.known.empty()) return;
  auto address = decode_address(peer.known);
  if (!address) {
    mark_failed(peer_rank, nullptr,
                Error{"comm: cannot connect to " + rank_name(peer_rank) + ": " + address.error().message});
    return;
  }
  // A failed handshake marks the peer failed itself; an endpoint UCX would not create leaves none.
  connect_now(peer_rank, *address, false, [this, peer_rank](Status connected) {
    if (!connected && peers[peer_rank]->ep == nullptr) mark_failed(peer_rank, nullptr, connected.error());
  });
  if (peer.handshaking && handshake_limit.count() > 0)
    lazy_handshakes.push_back({peer_rank, peer.ep, std::chrono::steady_clock::now() + handshake_limit});
}

bool Engine::State::give_up_late_handshakes() {
  if (lazy_handshakes.empty()) return false;
  const auto now = std::chrono::steady_clock::now();
  std::vector<int> late;
  std::erase_if(lazy_handshakes, [&](const LazyHandshake& h) {
    const Peer& peer = *peers[h.rank];
    if (peer.ep != h.ep || !peer.handshaking) return true;  // taken, failed or replaced meanwhile
    if (now < h.deadline) return false;
    late.push_back(h.rank);
    return true;
  });
  for (int peer : late) give_up_connecting(peer, handshake_too_late(peer, handshake_limit));
  return !late.empty();
}

// A peer that has not taken the handshake in time (it died while its endpoint was being wired
// up, or it hangs) counts as failed: the endpoint is closed and what waits on it fails.
void Engine::State::give_up_connecting(int peer_rank, const Error& failure) {
  Peer& peer = *peers[peer_rank];
  if (!peer.handshaking) return;
  peer.handshaking = false;
  mark_failed(peer_rank, peer.ep, failure);
}

// The receive that takes every peer's handshake (any source), posted again after each one.
void Engine::State::post_handshake_receive() {
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
  param.cb.recv = on_handshake_received;
  param.user_data = this;
  const ucs_status_ptr_t request =
      ucp_tag_recv_nbx(worker, nullptr, 0, tag_encode(MessageKey{MessageKind::handshake}, 0), tag_kind_bits, &param);
  TROUPE_CHECK(request != nullptr && !UCS_PTR_IS_ERR(request), "the handshake receive could not be posted");
  handshake_receive = request;
}

void Engine::State::on_handshake_received(void* request, ucs_status_t status, const ucp_tag_recv_info_t*,
                                          void* user_data) {
  auto* state = static_cast<State*>(user_data);
  ucp_request_free(request);
  state->handshake_receive = nullptr;
  if (status != UCS_ERR_CANCELED && !state->stopping) state->post_handshake_receive();
}

Status Engine::State::create_endpoint(int peer_rank, const std::vector<std::uint8_t>& address) {
  Peer& peer = *peers[peer_rank];
  if (peer.ep != nullptr || peer.failed) retire(peer_rank);
  ucp_ep_params_t params{};
  params.field_mask =
      UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE | UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(address.data());
  params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
  params.err_handler.cb = on_peer_error;
  params.err_handler.arg = &peer;
  const ucs_status_t status = ucp_ep_create(worker, &params, &peer.ep);
  if (status != UCS_OK) {
    peer.ep = nullptr;
    return Error{"comm: cannot connect to " + rank_name(peer_rank) + ": " + ucs_status_string(status)};
  }
  return {};
}

void Engine::State::on_peer_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
  auto* peer = static_cast<Peer*>(arg);
  std::lock_guard lock(peer->state->mutex);
  peer->state->failed_peers.push_back({peer->rank, ep, status});
}

void Engine::State::close_endpoint(Peer& peer) {
  if (peer.region_key != nullptr) {
    ucp_rkey_destroy(peer.region_key);
    peer.region_key = nullptr;
    compute::memory_ledger().remove(compute::MemoryKind::comm_buffers, peer.region.size());
  }
  peer.region = {};
  if (peer.ep == nullptr) return;
  ucp_request_param_t param{};
  param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
  param.flags = UCP_EP_CLOSE_FLAG_FORCE;
  const ucs_status_ptr_t request = ucp_ep_close_nbx(peer.ep, &param);
  if (request != nullptr && !UCS_PTR_IS_ERR(request)) closing.push_back(request);
  peer.ep = nullptr;
}

// A peer connected before whose process was replaced (it failed, or it is alive but the job gave
// up on it): what still waits on the old endpoint fails as on a lost peer, then the peer starts
// afresh, neither failed nor connected, its old region unmapped.
void Engine::State::retire(int peer_rank) {
  Peer& peer = *peers[peer_rank];
  if (!peer.failed)
    mark_failed(peer_rank, peer.ep, Error{"comm: " + rank_name(peer_rank) + " replaced by a new process"});
  peer.failed = false;
  peer.failure = Error{};
  peer.transports.clear();
}

// A peer's endpoint `ep` failed: its operations fail with an Error naming it, and so does every
// watch that includes it. Sends on the endpoint are failed by UCX when it is closed; receives
// are worker-wide, so they are cancelled here. An error of an endpoint replaced since is old news.
void Engine::State::mark_failed(int peer_rank, ucp_ep_h ep, Error failure) {
  Peer& peer = *peers[peer_rank];
  if (peer.failed || ep != peer.ep) return;
  peer.failed = true;
  peer.failure = std::move(failure);
  close_endpoint(peer);
  for (auto& [id, op] : operations) {
    if (op.recv && op.peer == peer_rank && op.request != nullptr) ucp_request_cancel(worker, op.request);
  }
  std::vector<WatchId> hit;
  for (const auto& [id, watch] : watches) {
    for (int p : watch.peers) {
      if (p == peer_rank) {
        hit.push_back(id);
        break;
      }
    }
  }
  for (WatchId id : hit) fire_watch(id, peer.failure);
}

void Engine::State::fire_watch(WatchId id, const Error& failure) {
  auto it = watches.find(id);
  if (it == watches.end()) return;
  auto lost = std::move(it->second.lost);
  watches.erase(it);
  lost(failure);
}

}  // namespace troupe::comm
