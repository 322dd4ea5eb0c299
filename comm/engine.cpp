#include "comm/engine.hpp"

#include <poll.h>
#include <ucp/api/ucp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdlib>
#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>

#include "comm/engine_address.hpp"
#include "comm/knobs.hpp"
#include "compute/memory_ledger.hpp"
#include "compute/sim/modelled_clock.hpp"

namespace troupe::comm {
namespace {

// UCX settings Troupe chooses unless the environment sets them (UCX_<name>).
struct UcxDefault {
  const char* name;
  const char* value;
};
constexpr UcxDefault ucx_defaults[] = {
    {"KEEPALIVE_INTERVAL", "1s"},  // a silent dead peer is noticed within seconds, not 20 s
    {"MM_ERROR_HANDLING", "y"},    // shared memory (posix, sysv) may serve endpoints with peer
                                   // error handling: UCX checks the peer process is alive;
                                   // without it such endpoints fall back to TCP over loopback
    {"MM_SEG_SIZE", "32k"},        // FIFO element: a quarter of the fragments of the default 8k;
                                   // 2-process all-reduce about 10% faster (docs/comm.md)
};

// Longest sleep with requests in flight (a send queued behind a full shared-memory FIFO
// raises no event, so this bounds its stall) and with none (UCX keepalive needs progress).
constexpr auto busy_sleep = std::chrono::microseconds(200);
constexpr auto idle_sleep = std::chrono::milliseconds(100);

// Whether UCX_TLS leaves shared-memory transports on (UCX warns about settings for
// transports it does not open).
bool shared_memory_enabled() {
  const char* tls = std::getenv("UCX_TLS");
  if (tls == nullptr || tls[0] == '^') return true;
  const std::string_view list(tls);
  for (std::string_view name : {"all", "sm", "shm", "posix", "sysv", "mm"}) {
    for (std::size_t at = list.find(name); at != std::string_view::npos; at = list.find(name, at + 1)) {
      const bool starts = at == 0 || list[at - 1] == ',';
      const bool ends = at + name.size() == list.size() || list[at + name.size()] == ',';
      if (starts && ends) return true;
    }
  }
  return false;
}

std::string rank_name(int rank) { return "rank " + std::to_string(rank); }

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

std::string describe(const PendingReceive& wait, std::chrono::steady_clock::time_point now) {
  const char* kind = wait.key.kind == MessageKind::collective ? "collective" : "point-to-point";
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%.1f", std::chrono::duration<double>(now - wait.posted).count());
  return std::string(kind) + " message " + std::to_string(wait.key.index) + " of operation " +
         std::to_string(wait.key.sequence) + " in group " + std::to_string(wait.key.group) + " (" +
         std::to_string(wait.bytes) + " bytes) from " + rank_name(wait.peer) + ", waiting " + seconds + " s";
}

struct Engine::State {
  struct Peer {
    State* state = nullptr;
    int rank = 0;
    ucp_ep_h ep = nullptr;
    ucp_rkey_h region_key = nullptr;        // while the peer's region is mapped here
    std::span<const std::byte> region;     // the peer's lent region, mapped into this process
    std::string transports;                // UCX's transports to the peer, once connected
    bool handshaking = false;              // connect() waits for the peer to take the handshake
    bool failed = false;
    Error failure;
  };
  struct Operation {
    State* state = nullptr;
    RequestId id = 0;
    int peer = 0;
    bool recv = false;
    bool point_to_point = false;
    std::size_t bytes = 0;
    std::chrono::steady_clock::time_point posted;
    void* request = nullptr;  // UCX's request while it is in flight
    Callback done;
  };
  struct Completion {
    RequestId id;
    ucs_status_t status;
    std::size_t length;
  };
  struct Watch {
    std::vector<int> peers;
    std::function<void(const Error&)> lost;
  };

  int rank = 0;
  ucp_context_h context = nullptr;
  ucp_worker_h worker = nullptr;
  int event_fd = -1;
  ucp_mem_h lent_region = nullptr;
  std::size_t lent_bytes = 0;  // counted in the memory ledger as comm_buffers while lent
  std::unique_ptr<BlockArena> arena;
  std::chrono::microseconds spin{0};
  std::optional<WireModel> wire;  // a simulated rank's link; wire_clock spends its time
  compute::ModelledClock wire_clock;
  std::thread thread;

  // Shared between posting threads and the progress thread, under `mutex`.
  std::mutex mutex;
  std::vector<std::function<void()>> tasks;
  struct PeerError {
    int rank;
    ucp_ep_h ep;  // the endpoint that failed: one replaced since is no longer the peer's
    ucs_status_t status;
  };
  std::vector<PeerError> failed_peers;  // from UCX's error handler
  std::atomic<bool> stopping{false};
  std::atomic<RequestId> next_request{1};
  // Receives in flight, oldest first (ids rise): written by the progress thread, read by any.
  mutable std::mutex pending_mutex;
  std::map<RequestId, PendingReceive> pending_receives;
  std::shared_ptr<Traffic> traffic = std::make_shared<Traffic>();

  // Progress thread only (and the creating thread before it starts).
  std::vector<std::unique_ptr<Peer>> peers;
  std::unordered_map<RequestId, Operation> operations;  // element addresses are stable
  std::vector<Completion> completions;
  std::unordered_map<WatchId, Watch> watches;
  WatchId next_watch = 1;
  std::vector<void*> closing;  // endpoint close requests in flight
  void* handshake_receive = nullptr;

  ~State() {
    if (worker != nullptr) ucp_worker_destroy(worker);
    if (lent_region != nullptr) {
      ucp_mem_unmap(context, lent_region);
      compute::memory_ledger().remove(compute::MemoryKind::comm_buffers, lent_bytes);
    }
    if (context != nullptr) ucp_cleanup(context);
  }

  // Allocates the region lent to neighbours (shared memory, from UCX's allocator) and packs its
  // key into `address`. Without shared memory, or when UCX cannot allocate, nothing is lent and
  // rings move every chunk as a message.
  void lend_region(EngineAddress& address) {
    const auto blocks = knob_value(knob_mapped_blocks);
    const auto block_bytes = std::max<std::int64_t>(knob_value(knob_chunk_bytes), 1);
    if (blocks == 0 || !shared_memory_enabled()) return;
    ucp_mem_map_params_t params{};
    params.field_mask =
        UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    params.address = nullptr;
    params.length = static_cast<std::size_t>(blocks * block_bytes);
    params.flags = UCP_MEM_MAP_ALLOCATE;
    if (ucp_mem_map(context, &params, &lent_region) != UCS_OK) {
      lent_region = nullptr;
      return;
    }
    ucp_mem_attr_t attributes{};
    attributes.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    void* key = nullptr;
    std::size_t key_bytes = 0;
    if (ucp_mem_query(lent_region, &attributes) != UCS_OK ||
        ucp_rkey_pack(context, lent_region, &key, &key_bytes) != UCS_OK) {
      ucp_mem_unmap(context, lent_region);
      lent_region = nullptr;
      return;
    }
    const auto* packed = static_cast<const std::uint8_t*>(key);
    address.region_key.assign(packed, packed + key_bytes);
    ucp_rkey_buffer_release(key);
    auto* base = static_cast<std::byte*>(attributes.address);
    std::memset(base, 0, params.length);  // fault the pages in now, not during the first collective
    lent_bytes = params.length;
    compute::memory_ledger().add(compute::MemoryKind::comm_buffers, lent_bytes);
    address.region_base = reinterpret_cast<std::uintptr_t>(base);
    address.region_bytes = params.length;
    arena = std::make_unique<BlockArena>(base, static_cast<std::size_t>(block_bytes), static_cast<std::size_t>(blocks));
  }

  // Maps `peer`'s lent region when UCX can (a peer on this host reached through shared memory);
  // otherwise the peer's chunks come as messages.
  void map_region(Peer& peer, const EngineAddress& address) {
    if (peer.rank == rank || address.region_key.empty() || peer.ep == nullptr) return;
    ucp_rkey_h key = nullptr;
    if (ucp_ep_rkey_unpack(peer.ep, address.region_key.data(), &key) != UCS_OK) return;
    void* mapped = nullptr;
    if (ucp_rkey_ptr(key, address.region_base, &mapped) != UCS_OK) {
      ucp_rkey_destroy(key);
      return;
    }
    peer.region_key = key;
    // Its pages count in this process's resident set once the ring touches them.
    compute::memory_ledger().add(compute::MemoryKind::comm_buffers, address.region_bytes);
    peer.region = {static_cast<const std::byte*>(mapped), static_cast<std::size_t>(address.region_bytes)};
  }

  static void on_send_done(void* request, ucs_status_t status, void* user_data) {
    auto* op = static_cast<Operation*>(user_data);
    op->request = nullptr;
    op->state->completions.push_back({op->id, status, op->bytes});
    ucp_request_free(request);
  }
  static void on_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data) {
    auto* op = static_cast<Operation*>(user_data);
    op->request = nullptr;
    op->state->completions.push_back({op->id, status, status == UCS_OK ? info->length : 0});
    ucp_request_free(request);
  }
  static void on_peer_error(void* arg, ucp_ep_h ep, ucs_status_t status) {
    auto* peer = static_cast<Peer*>(arg);
    std::lock_guard lock(peer->state->mutex);
    peer->state->failed_peers.push_back({peer->rank, ep, status});
  }

  Operation& add_operation(RequestId id, int peer, bool recv, const MessageKey& key, std::size_t bytes,
                           Callback done) {
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
  bool can_issue(const Operation& op) {
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

  void track(Operation& op, ucs_status_ptr_t result, std::size_t immediate_length) {
    if (result == nullptr) {
      completions.push_back({op.id, UCS_OK, immediate_length});
    } else if (UCS_PTR_IS_ERR(result)) {
      completions.push_back({op.id, UCS_PTR_STATUS(result), 0});
    } else {
      op.request = result;
    }
  }

  void issue_send(RequestId id, int peer, const MessageKey& key, const void* data, std::size_t bytes, Callback done) {
    Operation& op = add_operation(id, peer, false, key, bytes, std::move(done));
    if (!can_issue(op)) return;
    if (wire && peer != rank) wire_clock.spend(wire->seconds(peer, bytes));
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = on_send_done;
    param.user_data = &op;
    track(op, ucp_tag_send_nbx(peers[peer]->ep, data, bytes, tag_encode(key, rank), &param), bytes);
  }

  void issue_recv(RequestId id, int peer, const MessageKey& key, void* data, std::size_t bytes, Callback done) {
    Operation& op = add_operation(id, peer, true, key, bytes, std::move(done));
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
    track(op, ucp_tag_recv_nbx(worker, data, bytes, tag_encode(key, peer), ~std::uint64_t{0}, &param), 0);
  }

  // Creates the endpoint, then sends the peer a handshake and waits until the peer has taken it.
  // UCX 1.13 wires an endpoint up lazily: it asks the peer for the id of its endpoint only when a
  // protocol first needs it (a rendezvous, a synchronous send). Until the answer comes, its
  // keepalive skips the endpoint, so a peer that dies then is never noticed and the operation
  // hangs; and a peer that dies while the answer to its own request is still queued here aborts
  // this process (an assertion in ucp_request_send_state_ff, "got REP message"). Left lazy, that
  // window opens at the first large message of the first collective; a synchronous send needs the
  // id, so the handshake closes the window while connect() still waits for both processes.
  void connect_now(int peer_rank, const EngineAddress& address, Callback done) {
    Status created = create_endpoint(peer_rank, address.worker);
    if (!created) return done(created);
    const ucp_ep_h ep = peers[peer_rank]->ep;
    auto finish = [this, peer_rank, ep, address, done = std::move(done)](ucs_status_t status) {
      Peer& peer = *peers[peer_rank];
      // Failed while connecting (given up, or lost), or connected again meanwhile.
      if (peer.failed) return done(Error{peer.failure.message});
      if (peer.ep != ep) return done(Error{"comm: " + rank_name(peer_rank) + " replaced by a new process"});
      peer.handshaking = false;
      if (status != UCS_OK)
        return done(Error{"comm: cannot connect to " + rank_name(peer_rank) + ": the handshake failed: " +
                          ucs_status_string(status)});
      peer.transports = endpoint_transports(ep);
      map_region(peer, address);
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

  using HandshakeDone = std::function<void(ucs_status_t)>;
  static void on_handshake_sent(void* request, ucs_status_t status, void* user_data) {
    std::unique_ptr<HandshakeDone> callback(static_cast<HandshakeDone*>(user_data));
    ucp_request_free(request);
    (*callback)(status);
  }

  // A peer that has not taken the handshake in time (it died while its endpoint was being wired
  // up, or it hangs) counts as failed: the endpoint is closed and what waits on it fails.
  void give_up_connecting(int peer_rank, const Error& failure) {
    Peer& peer = *peers[peer_rank];
    if (!peer.handshaking) return;
    peer.handshaking = false;
    mark_failed(peer_rank, peer.ep, failure);
  }

  // The receive that takes every peer's handshake (any source), posted again after each one.
  void post_handshake_receive() {
    ucp_request_param_t param{};
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FLAG_NO_IMM_CMPL;
    param.cb.recv = on_handshake_received;
    param.user_data = this;
    const ucs_status_ptr_t request =
        ucp_tag_recv_nbx(worker, nullptr, 0, tag_encode(MessageKey{MessageKind::handshake}, 0), tag_kind_bits, &param);
    TROUPE_CHECK(request != nullptr && !UCS_PTR_IS_ERR(request), "the handshake receive could not be posted");
    handshake_receive = request;
  }
  static void on_handshake_received(void* request, ucs_status_t status, const ucp_tag_recv_info_t*, void* user_data) {
    auto* state = static_cast<State*>(user_data);
    ucp_request_free(request);
    state->handshake_receive = nullptr;
    if (status != UCS_ERR_CANCELED && !state->stopping) state->post_handshake_receive();
  }

  Status create_endpoint(int peer_rank, const std::vector<std::uint8_t>& address) {
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

  void close_endpoint(Peer& peer) {
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
  void retire(int peer_rank) {
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
  void mark_failed(int peer_rank, ucp_ep_h ep, Error failure) {
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

  void fire_watch(WatchId id, const Error& failure) {
    auto it = watches.find(id);
    if (it == watches.end()) return;
    auto lost = std::move(it->second.lost);
    watches.erase(it);
    lost(failure);
  }

  Status outcome(const Operation& op, const Completion& c) const {
    const std::string what = (op.recv ? "receive from " : "send to ") + rank_name(op.peer);
    if (c.status == UCS_OK) {
      if (c.length == op.bytes) return {};
      return Error{"comm: " + what + ": expected " + std::to_string(op.bytes) + " bytes, got " +
                   std::to_string(c.length)};
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
  void complete(Operation& op, Status status) {
    traffic->requests_in_flight.fetch_sub(1, std::memory_order_relaxed);
    if (status && op.point_to_point)
      traffic->finished(op.recv ? TrafficKind::recv : TrafficKind::send, op.bytes,
                        std::chrono::steady_clock::now() - op.posted);
    std::exchange(op.done, nullptr)(std::move(status));
  }

  // Failures, then completions, until neither is left. Returns whether anything ran.
  bool drain() {
    bool worked = false;
    for (;;) {
      std::vector<PeerError> failed;
      {
        std::lock_guard lock(mutex);
        failed.swap(failed_peers);
      }
      for (const PeerError& e : failed)
        mark_failed(e.rank, e.ep,
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

  bool run_tasks() {
    std::vector<std::function<void()>> batch;
    {
      std::lock_guard lock(mutex);
      batch.swap(tasks);
    }
    for (auto& task : batch) task();
    return !batch.empty();
  }

  // Sleeps on the worker's event fd, at most `limit`, unless an event or a task is waiting.
  void sleep_until_event(std::chrono::nanoseconds limit) {
    if (ucp_worker_arm(worker) == UCS_ERR_BUSY) return;
    {
      std::lock_guard lock(mutex);
      if (!tasks.empty() || !failed_peers.empty() || stopping) return;
    }
    pollfd fd{event_fd, POLLIN, 0};
    const timespec timeout{static_cast<time_t>(limit.count() / 1000000000),
                           static_cast<long>(limit.count() % 1000000000)};
    ppoll(&fd, 1, &timeout, nullptr);
  }

  // After stop: every endpoint is force-closed and every operation left gets an Error, those
  // that callbacks and tasks post on the way included.
  void shut_down() {
    for (auto& [id, op] : operations) {
      if (op.recv && op.request != nullptr) ucp_request_cancel(worker, op.request);
    }
    if (handshake_receive != nullptr) ucp_request_cancel(worker, handshake_receive);
    for (auto& peer : peers) close_endpoint(*peer);
    for (void* request : closing) {
      while (ucp_request_check_status(request) == UCS_INPROGRESS) ucp_worker_progress(worker);
      ucp_request_free(request);
    }
    closing.clear();
    while (ucp_worker_progress(worker) != 0) {
    }
    while (run_tasks() || drain()) {
    }
    // What UCX still holds (a send it could not cancel) keeps its record, without a callback,
    // until the worker is destroyed.
    std::vector<RequestId> left;
    for (const auto& [id, op] : operations) {
      if (op.done) left.push_back(id);
    }
    for (RequestId id : left) {
      auto it = operations.find(id);
      if (it == operations.end() || !it->second.done) continue;
      complete(it->second, Error{"comm: the engine of " + rank_name(rank) + " stopped"});
    }
    while (run_tasks() || drain()) {
    }
  }
};

namespace {
thread_local const void* progress_thread_state = nullptr;
}

Engine::Engine(int rank, int world_size) : rank_(rank), world_size_(world_size), state_(std::make_unique<State>()) {}

Expected<std::unique_ptr<Engine>> Engine::create(int rank, int world_size, const std::optional<WireModel>& wire) {
  if (world_size < 1 || world_size > max_rank + 1) {
    return Error{"comm: world size " + std::to_string(world_size) + " is outside [1, " + std::to_string(max_rank + 1) +
                 "]"};
  }
  if (rank < 0 || rank >= world_size) {
    return Error{"comm: rank " + std::to_string(rank) + " is outside [0, " + std::to_string(world_size) + ")"};
  }
  if (Status knobs = check_knobs(); !knobs) return knobs.error();
  std::unique_ptr<Engine> engine(new Engine(rank, world_size));
  State& s = *engine->state_;
  s.rank = rank;

  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp_config_read(nullptr, nullptr, &config);
  if (status != UCS_OK)
    return Error{std::string("comm: cannot read the UCX configuration: ") + ucs_status_string(status)};
  for (const UcxDefault& d : ucx_defaults) {
    if (std::getenv((std::string("UCX_") + d.name).c_str()) != nullptr) continue;
    if (std::string_view(d.name).starts_with("MM_") && !shared_memory_enabled()) continue;
    ucp_config_modify(config, d.name, d.value);
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP | UCP_FEATURE_RMA;  // RMA: the lent region
  status = ucp_init(&params, config, &s.context);
  ucp_config_release(config);
  if (status != UCS_OK) return Error{std::string("comm: cannot initialise UCX: ") + ucs_status_string(status)};

  ucp_worker_params_t worker_params{};
  worker_params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  worker_params.thread_mode = UCS_THREAD_MODE_SINGLE;  // only the progress thread touches it
  status = ucp_worker_create(s.context, &worker_params, &s.worker);
  if (status != UCS_OK) return Error{std::string("comm: cannot create the UCX worker: ") + ucs_status_string(status)};
  status = ucp_worker_get_efd(s.worker, &s.event_fd);
  if (status != UCS_OK) return Error{std::string("comm: no UCX event fd: ") + ucs_status_string(status)};

  ucp_address_t* address = nullptr;
  std::size_t address_length = 0;
  status = ucp_worker_get_address(s.worker, &address, &address_length);
  if (status != UCS_OK) return Error{std::string("comm: no UCX worker address: ") + ucs_status_string(status)};
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(address);
  EngineAddress own;
  own.worker.assign(bytes, bytes + address_length);
  ucp_worker_release_address(s.worker, address);
  s.wire = wire;
  if (!wire) s.lend_region(own);
  engine->address_ = encode_address(own);

  for (int r = 0; r < world_size; ++r) {
    s.peers.push_back(std::make_unique<State::Peer>());
    s.peers.back()->state = &s;
    s.peers.back()->rank = r;
  }
  s.spin = std::chrono::microseconds(knob_value(knob_spin_us));
  s.thread = std::thread([&s] {
    progress_thread_state = &s;
    s.post_handshake_receive();
    auto last_work = std::chrono::steady_clock::now();
    while (!s.stopping) {
      bool worked = s.run_tasks();
      while (ucp_worker_progress(s.worker) != 0) worked = true;
      worked = s.drain() || worked;
      const auto now = std::chrono::steady_clock::now();
      if (worked) {
        last_work = now;
        continue;
      }
      if (s.operations.empty()) {
        s.sleep_until_event(idle_sleep);
      } else if (now - last_work < s.spin) {
        std::this_thread::yield();
      } else {
        s.sleep_until_event(busy_sleep);
      }
    }
    s.shut_down();
  });
  if (Status self = engine->connect(rank, engine->address_); !self) return self.error();
  return engine;
}

Engine::~Engine() {
  State& s = *state_;
  if (s.thread.joinable()) {
    {
      std::lock_guard lock(s.mutex);
      s.stopping = true;
    }
    ucp_worker_signal(s.worker);
    s.thread.join();
  }
}

bool Engine::on_progress_thread() const { return progress_thread_state == state_.get(); }

void Engine::post(std::function<void()> task) {
  State& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    s.tasks.push_back(std::move(task));
  }
  if (!on_progress_thread()) ucp_worker_signal(s.worker);
}

Status Engine::connect(int peer, std::span<const std::uint8_t> address) {
  if (peer < 0 || peer >= world_size_) {
    return Error{"comm: cannot connect to rank " + std::to_string(peer) + ": world size is " +
                 std::to_string(world_size_)};
  }
  auto decoded = decode_address(address);
  if (!decoded) return Error{"comm: cannot connect to rank " + std::to_string(peer) + ": " + decoded.error().message};
  TROUPE_CHECK(!on_progress_thread(), "connect() on the progress thread, which must progress the wire-up");
  auto result = std::make_shared<std::promise<Status>>();
  std::future<Status> outcome = result->get_future();
  post([this, peer, address = *decoded, result] {
    state_->connect_now(peer, address, [result](Status s) { result->set_value(std::move(s)); });
  });
  // The default wait (20 s) is far beyond a starved but live process, and short enough that a
  // peer dead before its endpoint was wired up fails the job's start.
  const std::chrono::seconds limit(knob_value(knob_handshake_s));
  if (limit.count() == 0 || outcome.wait_for(limit) == std::future_status::ready) return outcome.get();
  const Error late = Error{"comm: cannot connect to rank " + std::to_string(peer) +
                           ": it did not take the handshake within " + std::to_string(limit.count()) + " s"};
  std::promise<void> given_up;
  post([&] {
    state_->give_up_connecting(peer, late);
    given_up.set_value();
  });
  given_up.get_future().get();
  if (outcome.wait_for(std::chrono::seconds(0)) == std::future_status::ready) return outcome.get();
  return late;
}

void Engine::grow_world(int world_size) {
  TROUPE_CHECK(world_size >= world_size_, "grow_world() to a smaller world");
  TROUPE_CHECK(!on_progress_thread(), "grow_world() on the progress thread");
  std::promise<void> grown;
  post([&] {
    State& s = *state_;
    for (int r = static_cast<int>(s.peers.size()); r < world_size; ++r) {
      s.peers.push_back(std::make_unique<State::Peer>());
      s.peers.back()->state = &s;
      s.peers.back()->rank = r;
    }
    world_size_ = world_size;  // here, where the progress thread reads it
    grown.set_value();
  });
  grown.get_future().get();
}

bool Engine::connected(int peer) {
  TROUPE_CHECK(peer >= 0 && peer < world_size_, "connected() of a rank outside the world");
  TROUPE_CHECK(!on_progress_thread(), "connected() on the progress thread");
  std::promise<bool> result;
  post([&] {
    const State::Peer& p = *state_->peers[peer];
    result.set_value(p.ep != nullptr && !p.failed);
  });
  return result.get_future().get();
}

std::span<const std::byte> Engine::peer_region(int peer) const {
  TROUPE_CHECK(peer >= 0 && peer < world_size_, "peer_region() of a rank outside the world");
  return state_->peers[peer]->region;
}

std::string Engine::transports(int peer) const {
  TROUPE_CHECK(peer >= 0 && peer < world_size_, "transports() of a rank outside the world");
  return state_->peers[peer]->transports;
}

std::size_t Engine::mapped_block_bytes() const {
  return state_->arena ? state_->arena->block_bytes() : 0;
}

void Engine::take_mapped_block(std::function<void(MappedBlock)> ready) {
  TROUPE_CHECK(on_progress_thread() && state_->arena, "take_mapped_block() off the progress thread or with no region");
  state_->arena->take(std::move(ready));
}

void Engine::give_back_mapped_block(std::uint64_t offset) {
  TROUPE_CHECK(on_progress_thread() && state_->arena, "give_back_mapped_block() off the progress thread or with no region");
  state_->arena->give_back(offset);
}

RequestId Engine::post_send(int peer, const MessageKey& key, const void* data, std::size_t bytes, Callback done) {
  TROUPE_CHECK(peer >= 0 && peer < world_size_, "send to a rank outside the world");
  const RequestId id = state_->next_request++;
  state_->traffic->requests_in_flight.fetch_add(1, std::memory_order_relaxed);
  if (on_progress_thread()) {
    state_->issue_send(id, peer, key, data, bytes, std::move(done));
  } else {
    post([this, id, peer, key, data, bytes, done = std::move(done)]() mutable {
      state_->issue_send(id, peer, key, data, bytes, std::move(done));
    });
  }
  return id;
}

RequestId Engine::post_recv(int peer, const MessageKey& key, void* data, std::size_t bytes, Callback done) {
  TROUPE_CHECK(peer >= 0 && peer < world_size_, "receive from a rank outside the world");
  const RequestId id = state_->next_request++;
  state_->traffic->requests_in_flight.fetch_add(1, std::memory_order_relaxed);
  if (on_progress_thread()) {
    state_->issue_recv(id, peer, key, data, bytes, std::move(done));
  } else {
    post([this, id, peer, key, data, bytes, done = std::move(done)]() mutable {
      state_->issue_recv(id, peer, key, data, bytes, std::move(done));
    });
  }
  return id;
}

void Engine::cancel(RequestId id) {
  TROUPE_CHECK(on_progress_thread(), "cancel() off the progress thread");
  State& s = *state_;
  auto it = s.operations.find(id);
  if (it != s.operations.end() && it->second.request != nullptr) ucp_request_cancel(s.worker, it->second.request);
}

std::optional<PendingReceive> Engine::oldest_pending_receive() const {
  std::lock_guard lock(state_->pending_mutex);
  if (state_->pending_receives.empty()) return std::nullopt;
  return state_->pending_receives.begin()->second;
}

const std::shared_ptr<Traffic>& Engine::traffic() const { return state_->traffic; }

WatchId Engine::watch_peers(std::vector<int> peers, std::function<void(const Error&)> lost) {
  TROUPE_CHECK(on_progress_thread(), "watch_peers() off the progress thread");
  State& s = *state_;
  const WatchId id = s.next_watch++;
  for (int p : peers) {
    if (p >= 0 && p < world_size_ && s.peers[p]->failed) {
      post([&s, id, p] { s.fire_watch(id, s.peers[p]->failure); });
      break;
    }
  }
  s.watches.emplace(id, State::Watch{std::move(peers), std::move(lost)});
  return id;
}

void Engine::unwatch_peers(WatchId id) {
  TROUPE_CHECK(on_progress_thread(), "unwatch_peers() off the progress thread");
  state_->watches.erase(id);
}

}  // namespace troupe::comm
