#pragma once
// The comm engine: one per process. It owns the UCX context, the UCX worker and the one thread
// that progresses them. Nothing in UCX moves unless someone calls ucp_worker_progress; here
// that someone is always the progress thread, and no other thread touches the worker (other
// threads hand it work through a queue and wake it with ucp_worker_signal). Callbacks of
// every operation therefore run on the progress thread, one at a time, never inside the
// post_* call that started the operation, so a state machine driven by them needs no locks.
//
// With no request in flight the thread sleeps in ppoll(2) on the worker's event fd (armed by
// ucp_worker_arm; ucp_worker_signal or any UCX event wakes it). With requests in flight it
// polls, yielding the CPU between empty polls, and sleeps (at most 200 us at a time) only
// after TROUPE_COMM_SPIN_US without progress: UCX raises no event when a full shared-memory
// FIFO drains, so a sleeping sender would stall; measured in docs/comm.md. A simulated rank's
// thread naps from 2 ms up to 32 ms, doubling while nothing moves (thousands share few cores).
//
// Each engine also lends its neighbours on the host a region of shared memory, cut into blocks of
// TROUPE_COMM_CHUNK_BYTES (UCX allocates it; a peer maps it with ucp_rkey_ptr). A ring stages a
// chunk in a block and sends only the block's offset; the neighbour reads the chunk in place and
// adds it into its own buffer, one copy fewer than a message through UCX's FIFO, which copies
// every byte in and out (docs/comm.md, "Mapped blocks").
//
// Endpoints use UCX's peer error handling: a peer that dies fails every operation that
// waits on it with an Error naming its rank, instead of hanging; connect() to it again with its
// replacement's address replaces the endpoint (an error the old one reports late is ignored). Teardown closes endpoints
// with UCP_EP_CLOSE_FLAG_FORCE: a graceful close waits forever for a peer that is gone.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "comm/block_arena.hpp"
#include "comm/tag.hpp"
#include "comm/traffic.hpp"
#include "comm/wire_model.hpp"
#include "compute/expected.hpp"

namespace troupe::comm {

using Callback = std::function<void(Status)>;
using RequestId = std::uint64_t;
using WatchId = std::uint64_t;

// A receive posted and not complete: what a stuck rank is waiting for, named by a watchdog.
struct PendingReceive {
  int peer = 0;
  MessageKey key;
  std::size_t bytes = 0;
  std::chrono::steady_clock::time_point posted;
};
// "collective message 5 of operation 17 in group 1 (4096 bytes) from rank 1, waiting 3.2 s"
std::string describe(const PendingReceive& wait, std::chrono::steady_clock::time_point now);

class Engine {
 public:
  // Creates the UCX context and worker for `rank` of `world_size` and starts the progress
  // thread. The engine is connected to itself; other peers come through connect() or introduce(). Checks every
  // TROUPE_COMM_* knob first: an invalid value is the error, naming the knob and its value. With a
  // `wire` model (a simulated rank) every send first takes the model's time on the progress
  // thread, and the engine lends no region, so every chunk of a ring is a message the model times.
  static Expected<std::unique_ptr<Engine>> create(int rank, int world_size,
                                                  const std::optional<WireModel>& wire = std::nullopt);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  int rank() const { return rank_; }
  int world_size() const { return world_size_; }
  // The job grew in place: ranks up to `world_size` − 1 (no fewer than now) can be connected. Not
  // on the progress thread; no other thread may use the engine meanwhile.
  void grow_world(int world_size);
  // What a peer passes to connect(): the worker's UCX address and this engine's lent region
  // (comm/engine_address.hpp).
  const std::vector<std::uint8_t>& address() const { return address_; }
  // Creates the endpoint to `peer` from its address, and maps the peer's region when it is on
  // this host. Any thread; returns once the peer's engine has taken an empty handshake message,
  // which finishes UCX's wire-up of the endpoint (engine.cpp says why that matters). A peer that
  // does not take it within TROUPE_COMM_HANDSHAKE_S (20 s) counts as failed, and connect() says
  // so. A peer connected before is replaced: its process was (a node process started again after
  // it died or hung), so the old endpoint is force-closed and the old region unmapped first, and
  // what still waited on them fails naming the peer, as on a lost peer; a failed peer accepts a
  // fresh connect() this way too.
  Status connect(int peer, std::span<const std::uint8_t> address);
  // connect() to each of `peers` with their handshakes in flight together, so that a rank joining
  // many partners waits about one handshake's round trip, not one a partner (a node process's
  // ranks starting again in an in-place recovery, on a loaded host, wait for survivors' progress
  // threads). The limit runs for all at once. The first failure in `peers`' order, once every
  // handshake has ended or been given up on; OK when every peer is connected.
  struct PeerAddress {
    int rank;
    std::span<const std::uint8_t> address;
  };
  Status connect(std::span<const PeerAddress> peers);
  // Learns `peer`'s address without connecting: the first send or receive that names the peer
  // makes the endpoint, with connect()'s handshake, on the progress thread (given up on after
  // TROUPE_COMM_HANDSHAKE_S, the peer then failed). Its region is never mapped, so a ring through
  // such a peer moves its chunks as messages: connect() the ranks whose rings should map (both
  // sides of each pair alike: a ring maps a neighbour's region only if the neighbour maps its).
  // The address a peer already has changes nothing; another one replaces the peer as connect()
  // does. Any thread but the progress thread; returns at once.
  Status introduce(int peer, std::span<const std::uint8_t> address);
  // Whether `peer` has a working endpoint: connected and not failed since. Any thread but the
  // progress thread.
  bool connected(int peer);
  // `peer`'s lent region as mapped into this process; empty when it cannot be mapped (another
  // host, shared memory off, or the peer lends none). Any thread, after connect() returned.
  std::span<const std::byte> peer_region(int peer) const;
  // The UCX transports that carry messages to `peer`, "tl/device" joined by commas: "sysv/memory"
  // or "posix/memory" (shared memory, one host), "tcp/eth0" (TCP), "self/memory" (this rank);
  // empty before connect(). Any thread, after connect() returned.
  std::string transports(int peer) const;

  // Sends `bytes` at `data` to `peer` / receives exactly `bytes` into `data` from `peer`, under
  // the tag made of `key` and the sending rank. Any thread. The buffer must stay valid until
  // `done` runs (on the progress thread) with the outcome; a failed peer makes it an Error
  // naming the peer. The id is good for cancel().
  RequestId post_send(int peer, const MessageKey& key, const void* data, std::size_t bytes, Callback done);
  RequestId post_recv(int peer, const MessageKey& key, void* data, std::size_t bytes, Callback done);
  // A token message (the messages of a token tensor, compute/tensor.hpp: a simulated rank's):
  // a message of `bytes` whose bytes are not there. Only its size crosses UCX, in 8 bytes; the
  // wire model and the traffic counts take `bytes`, and a receive whose sender's size differs, or
  // that meets a message with bytes, fails as a receive of the wrong size does.
  RequestId post_token_send(int peer, const MessageKey& key, std::size_t bytes, Callback done);
  RequestId post_token_recv(int peer, const MessageKey& key, std::size_t bytes, Callback done);
  // Runs `task` on the progress thread, after the current callback (if posted from one).
  void post(std::function<void()> task);

  // Progress thread only (collective state machines use these).
  bool on_progress_thread() const;
  // Asks UCX to cancel a pending operation; a cancelled receive completes with an Error. A send
  // UCX cannot cancel stays pending: its buffer must outlive the engine's endpoint to its peer.
  void cancel(RequestId id);
  // Calls `lost` once, with the error naming the rank, when any of `peers` fails (after the
  // current callback, if one already has). unwatch_peers() ends the watch.
  WatchId watch_peers(std::vector<int> peers, std::function<void(const Error&)> lost);
  void unwatch_peers(WatchId id);

  // This engine's lent blocks (progress thread only). Block size in bytes, 0 when it lends none
  // (TROUPE_COMM_MAPPED_BLOCKS=0, shared memory off, or UCX could not allocate the region).
  std::size_t mapped_block_bytes() const;
  // Runs `ready` with a free block, at once or when one is given back.
  void take_mapped_block(std::function<void(MappedBlock)> ready);
  void give_back_mapped_block(std::uint64_t offset);

  // The oldest receive in flight, if any. Any thread.
  std::optional<PendingReceive> oldest_pending_receive() const;

  // What this engine has moved and has in flight; shared, so a reader may outlive the engine.
  const std::shared_ptr<Traffic>& traffic() const;

 private:
  struct State;
  Engine(int rank, int world_size);
  RequestId post_operation(int peer, bool recv, const MessageKey& key, void* data, std::size_t bytes, bool token,
                           Callback done);

  int rank_ = 0;
  int world_size_ = 0;
  std::vector<std::uint8_t> address_;
  std::unique_ptr<State> state_;
};

}  // namespace troupe::comm
