#include "comm/engine.hpp"

#include <cstdlib>
#include <future>
#include <string>

#include "comm/engine_state.hpp"
#include "comm/knobs.hpp"

namespace troupe::comm {

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
  EngineAddress own;
  s.wire = wire;
  if (Status opened = s.open(own); !opened) return opened.error();
  if (!wire) s.lend_region(own);
  engine->address_ = encode_address(own);

  for (int r = 0; r < world_size; ++r) {
    s.peers.push_back(std::make_unique<State::Peer>());
    s.peers.back()->state = &s;
    s.peers.back()->rank = r;
  }
  s.spin = std::chrono::microseconds(knob_value(knob_spin_us));
  s.handshake_limit = std::chrono::seconds(knob_value(knob_handshake_s));
  if (wire) {
    // Hundreds of simulated ranks share a few cores, where a progress thread that polls for a
    // millisecond or wakes every 200 us while it waits takes the cores from the ranks it waits for
    // (a 1,024-rank job ran at a load average of 900). It polls 50 us after its last progress,
    // yielding between polls: a ring's next chunk, or the next collective's first, usually comes
    // within that, and is then taken without the sleep, the peer's wake-up signal and the wake-up
    // that each arrival at a sleeping thread costs (docs/scale.md: a step of gpt3-13b at 32 ranks
    // a sixth shorter, of nano at 1,024 ranks a fifth). The link's time is the wire model's.
    if (std::getenv(knob_spin_us.name) == nullptr) s.spin = std::chrono::microseconds(50);
    s.busy_sleep = std::chrono::milliseconds(2);
    s.busy_sleep_limit = std::chrono::milliseconds(32);
    // With no send held by UCX a simulated rank sleeps up to a second (its keepalive is 10 s).
    s.idle_sleep = std::chrono::seconds(1);
    // A peer among a thousand on two cores may take minutes to be scheduled while every rank
    // connects (1,024 ranks: a handshake not taken within 20 s ended the job); a dead one is the
    // job's to notice, by its heartbeats.
    if (std::getenv(knob_handshake_s.name) == nullptr) s.handshake_limit = std::chrono::seconds(120);
  }
  s.thread = std::thread([&s] { s.run(); });
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

bool Engine::on_progress_thread() const { return state_->is_progress_thread(); }

void Engine::post(std::function<void()> task) {
  State& s = *state_;
  {
    std::lock_guard lock(s.mutex);
    s.tasks.push_back(std::move(task));
  }
  if (!on_progress_thread()) ucp_worker_signal(s.worker);
}

namespace {

// `address` decoded, for `peer` of a world of `world_size`; or what is wrong with either.
Expected<EngineAddress> peer_address(int peer, int world_size, std::span<const std::uint8_t> address) {
  if (peer < 0 || peer >= world_size) {
    return Error{"comm: cannot connect to rank " + std::to_string(peer) + ": world size is " +
                 std::to_string(world_size)};
  }
  auto decoded = decode_address(address);
  if (!decoded) return Error{"comm: cannot connect to rank " + std::to_string(peer) + ": " + decoded.error().message};
  return decoded;
}

}  // namespace

Status Engine::connect(int peer, std::span<const std::uint8_t> address) {
  const PeerAddress one{peer, address};
  return connect(std::span<const PeerAddress>(&one, 1));
}

Status Engine::connect(std::span<const PeerAddress> peers) {
  TROUPE_CHECK(!on_progress_thread(), "connect() on the progress thread, which must progress the wire-up");
  std::vector<EngineAddress> decoded;
  for (const PeerAddress& p : peers) {
    auto address = peer_address(p.rank, world_size_, p.address);
    if (!address) return address.error();
    decoded.push_back(std::move(*address));
  }
  std::vector<std::future<Status>> outcomes;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    auto result = std::make_shared<std::promise<Status>>();
    outcomes.push_back(result->get_future());
    post([this, peer = peers[i].rank, address = std::move(decoded[i]),
          known = std::vector<std::uint8_t>(peers[i].address.begin(), peers[i].address.end()), result] {
      state_->peers[peer]->known = known;
      state_->connect_now(peer, address, true, [result](Status s) { result->set_value(std::move(s)); });
    });
  }
  // The default wait (20 s) is far beyond a starved but live process, and short enough that a
  // peer dead before its endpoint was wired up fails the job's start. Set at create(), read-only.
  const std::chrono::seconds limit = state_->handshake_limit;
  const auto deadline = std::chrono::steady_clock::now() + limit;
  Status first_failure;
  for (std::size_t i = 0; i < peers.size(); ++i) {
    Status outcome;
    if (limit.count() == 0 || outcomes[i].wait_until(deadline) == std::future_status::ready) {
      outcome = outcomes[i].get();
    } else {
      const Error late = handshake_too_late(peers[i].rank, limit);
      std::promise<void> given_up;
      post([&, peer = peers[i].rank] {
        state_->give_up_connecting(peer, late);
        given_up.set_value();
      });
      given_up.get_future().get();
      outcome = outcomes[i].wait_for(std::chrono::seconds(0)) == std::future_status::ready ? outcomes[i].get() : late;
    }
    if (!outcome && first_failure) first_failure = outcome;
  }
  return first_failure;
}

Status Engine::introduce(int peer, std::span<const std::uint8_t> address) {
  if (auto decoded = peer_address(peer, world_size_, address); !decoded) return decoded.error();
  TROUPE_CHECK(!on_progress_thread(), "introduce() on the progress thread");
  post([this, peer, known = std::vector<std::uint8_t>(address.begin(), address.end())]() mutable {
    state_->introduce_now(peer, std::move(known));
  });
  return {};
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
  return post_operation(peer, false, key, const_cast<void*>(data), bytes, false, std::move(done));
}

RequestId Engine::post_recv(int peer, const MessageKey& key, void* data, std::size_t bytes, Callback done) {
  return post_operation(peer, true, key, data, bytes, false, std::move(done));
}

RequestId Engine::post_token_send(int peer, const MessageKey& key, std::size_t bytes, Callback done) {
  return post_operation(peer, false, key, nullptr, bytes, true, std::move(done));
}

RequestId Engine::post_token_recv(int peer, const MessageKey& key, std::size_t bytes, Callback done) {
  return post_operation(peer, true, key, nullptr, bytes, true, std::move(done));
}

RequestId Engine::post_operation(int peer, bool recv, const MessageKey& key, void* data, std::size_t bytes, bool token,
                                 Callback done) {
  TROUPE_CHECK(peer >= 0 && peer < world_size_,
               recv ? "receive from a rank outside the world" : "send to a rank outside the world");
  const RequestId id = state_->next_request++;
  state_->traffic->requests_in_flight.fetch_add(1, std::memory_order_relaxed);
  auto issue = [this, id, peer, recv, key, data, bytes, token](Callback done) {
    if (recv)
      state_->issue_recv(id, peer, key, data, bytes, token, std::move(done));
    else
      state_->issue_send(id, peer, key, data, bytes, token, std::move(done));
  };
  if (on_progress_thread()) {
    issue(std::move(done));
  } else {
    post([issue, done = std::move(done)]() mutable { issue(std::move(done)); });
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
