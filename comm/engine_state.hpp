#pragma once
// The comm engine's state, private to comm/engine*.cpp: what one engine holds (its UCX context and
// worker, peers, operations in flight, the progress thread) and the members that act on it, defined
// one concept a file:
//   engine_region.cpp      the shared-memory region lent to neighbours, and neighbours' regions mapped
//   engine_endpoints.cpp   endpoints: connect with its handshake, failure, retirement, watches
//   engine_operations.cpp  sends and receives in flight, their completions and outcomes
//   engine_progress.cpp    UCX set-up, the progress loop, tasks, sleeping, shutdown
// engine.cpp holds the public Engine, which posts work here.

#include <ucp/api/ucp.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "comm/engine.hpp"
#include "comm/engine_address.hpp"
#include "compute/sim/modelled_clock.hpp"

namespace troupe::comm {

// "rank 3"
std::string rank_name(int rank);
// What connect() and a connection on first use say of a peer that did not take the handshake.
Error handshake_too_late(int peer, std::chrono::seconds limit);
// Whether UCX_TLS leaves shared-memory transports on (UCX warns about settings for transports it
// does not open).
bool shared_memory_enabled();

struct Engine::State {
  struct Peer {
    State* state = nullptr;
    int rank = 0;
    ucp_ep_h ep = nullptr;
    ucp_rkey_h region_key = nullptr;    // while the peer's region is mapped here
    std::span<const std::byte> region;  // the peer's lent region, mapped into this process
    std::string transports;             // UCX's transports to the peer, once connected
    bool handshaking = false;           // connect() waits for the peer to take the handshake
    std::vector<std::uint8_t> known;    // its address, once connected or introduced
    bool failed = false;
    Error failure;
  };
  struct Operation {
    State* state = nullptr;
    RequestId id = 0;
    int peer = 0;
    bool recv = false;
    bool point_to_point = false;
    std::size_t bytes = 0;  // a token message's: the size it stands for
    // A token message's 8 bytes on the wire: the size sent, or the size received.
    bool token = false;
    std::uint64_t token_bytes = 0;
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
  // Sleep with a send held by UCX: one queued behind a full shared-memory FIFO raises no event,
  // so this bounds its stall. Each sleep that ends with nothing to do doubles the next, up to
  // busy_sleep_limit; work brings it back to busy_sleep.
  std::chrono::microseconds busy_sleep{200};
  std::chrono::microseconds busy_sleep_limit{200};
  // Sleep with no send held by UCX (its keepalive needs progress once an interval).
  std::chrono::milliseconds idle_sleep{100};
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
  // Handshakes of connections made on first use, each given up on at its deadline.
  struct LazyHandshake {
    int rank;
    ucp_ep_h ep;
    std::chrono::steady_clock::time_point deadline;
  };
  std::vector<LazyHandshake> lazy_handshakes;
  std::chrono::seconds handshake_limit{0};  // TROUPE_COMM_HANDSHAKE_S; 0: none

  ~State();

  // engine_progress.cpp
  bool is_progress_thread() const;
  // Creates the UCX context and worker, and fills `address` with the worker's.
  Status open(EngineAddress& address);
  // The progress thread's loop, until stopping; then shut_down().
  void run();
  bool run_tasks();
  void sleep_until_event(std::chrono::nanoseconds limit);
  // Whether a send in flight is still UCX's (neither completed at once nor called back).
  bool sends_held_by_ucx() const;
  void shut_down();
  // Receives and drops what waits in UCX's unexpected queue (late messages of an abandoned
  // recovery epoch), so that destroying the worker neither warns once a message nor leaves
  // their descriptors behind.
  void discard_unexpected();

  // engine_region.cpp
  void lend_region(EngineAddress& address);
  void map_region(Peer& peer, const EngineAddress& address);

  // engine_endpoints.cpp
  // `map`: also map the peer's lent region (connect() does; a connection on first use does not).
  void connect_now(int peer_rank, const EngineAddress& address, bool map, Callback done);
  void introduce_now(int peer_rank, std::vector<std::uint8_t> address);
  void connect_on_first_use(int peer_rank);
  bool give_up_late_handshakes();  // whether it gave up on any
  using HandshakeDone = std::function<void(ucs_status_t)>;
  static void on_handshake_sent(void* request, ucs_status_t status, void* user_data);
  void give_up_connecting(int peer_rank, const Error& failure);
  void post_handshake_receive();
  static void on_handshake_received(void* request, ucs_status_t status, const ucp_tag_recv_info_t*, void* user_data);
  Status create_endpoint(int peer_rank, const std::vector<std::uint8_t>& address);
  static void on_peer_error(void* arg, ucp_ep_h ep, ucs_status_t status);
  void close_endpoint(Peer& peer);
  void retire(int peer_rank);
  void mark_failed(int peer_rank, ucp_ep_h ep, Error failure);
  void fire_watch(WatchId id, const Error& failure);

  // engine_operations.cpp
  static void on_send_done(void* request, ucs_status_t status, void* user_data);
  static void on_recv_done(void* request, ucs_status_t status, const ucp_tag_recv_info_t* info, void* user_data);
  Operation& add_operation(RequestId id, int peer, bool recv, const MessageKey& key, std::size_t bytes, Callback done);
  bool can_issue(const Operation& op);
  void track(Operation& op, ucs_status_ptr_t result, std::size_t immediate_length);
  // `token`: a token message of `bytes` (data unused).
  void issue_send(RequestId id, int peer, const MessageKey& key, const void* data, std::size_t bytes, bool token,
                  Callback done);
  void issue_recv(RequestId id, int peer, const MessageKey& key, void* data, std::size_t bytes, bool token,
                  Callback done);
  Status outcome(const Operation& op, const Completion& c) const;
  void complete(Operation& op, Status status);
  bool drain();
};

}  // namespace troupe::comm
