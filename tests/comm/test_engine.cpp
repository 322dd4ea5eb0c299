// The engine's point-to-point messages between real processes: matching by key and source,
// size checks, and a peer that dies.

#include "rank_support.hpp"

#include "comm/engine_address.hpp"
#include "comm/knobs.hpp"
#include "comm/peer_transports.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <functional>
#include <future>
#include <optional>
#include <thread>

using namespace troupe::comm;
using namespace troupe::comm::test;
using troupe::Error;
using troupe::Expected;
using troupe::Status;

namespace {

// Posts through `post` and waits for the callback.
template <typename Post>
Status wait(Post post) {
  std::promise<Status> promise;
  auto result = promise.get_future();
  post([&promise](Status s) { promise.set_value(std::move(s)); });
  return result.get();
}

MessageKey key(std::uint16_t index) { return MessageKey{MessageKind::point_to_point, 9, 0, index}; }

// A survivor's report: the seconds its operation took to fail, then the error.
Expected<std::vector<std::uint8_t>> failure_report(std::chrono::steady_clock::time_point start, const Status& s,
                                                   const std::string& operation) {
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (s.ok()) return Error{operation + " with a dead peer succeeded"};
  const std::string report = std::to_string(seconds) + " " + s.error().message;
  return std::vector<std::uint8_t>(report.begin(), report.end());
}

// `victim` died of SIGKILL and `survivor`'s operation failed naming it within 5 s.
void check_lost_within_seconds(Expected<std::vector<LocalRankResult>>& results, int victim, int survivor) {
  REQUIRE(results.ok());
  CHECK((*results)[victim].signal == SIGKILL);
  const LocalRankResult& result = (*results)[survivor];
  INFO(result.error);
  REQUIRE(result.ok);
  const std::string report(result.report.begin(), result.report.end());
  INFO(report);
  CHECK_THAT(report, Catch::Contains("rank " + std::to_string(victim) + " lost"));
  CHECK(std::stod(report) < 5.0);
}

}  // namespace

TEST_CASE("engine creation rejects a rank outside the world", "[engine]") {
  CHECK_FALSE(Engine::create(2, 2).ok());
  CHECK_FALSE(Engine::create(-1, 2).ok());
  const auto none = Engine::create(0, 0);
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(none.error().message, Catch::Contains("world size 0"));
}

TEST_CASE("messages match by key and source rank, not by the order they were posted in", "[engine]") {
  run_ranks(3, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    const int me = engine.rank();
    // Every rank sends to every rank (itself included) two messages, keys 1 and 2, whose
    // contents name sender, receiver and key; receives are posted in the opposite order.
    std::vector<std::uint64_t> out, in(2 * engine.world_size(), 0);
    for (int peer = 0; peer < engine.world_size(); ++peer) {
      for (std::uint16_t k : {1, 2}) out.push_back(std::uint64_t(me) << 32 | std::uint64_t(peer) << 16 | k);
    }
    std::vector<std::future<Status>> pending;
    std::vector<std::promise<Status>> promises(4 * engine.world_size());
    int next = 0;
    auto callback = [&] {
      auto* promise = &promises[next++];
      pending.push_back(promise->get_future());
      return [promise](Status s) { promise->set_value(std::move(s)); };
    };
    for (int peer = engine.world_size() - 1; peer >= 0; --peer) {
      for (std::uint16_t k : {2, 1}) engine.post_recv(peer, key(k), &in[2 * peer + k - 1], 8, callback());
    }
    for (int peer = 0; peer < engine.world_size(); ++peer) {
      for (std::uint16_t k : {1, 2}) engine.post_send(peer, key(k), &out[2 * peer + k - 1], 8, callback());
    }
    for (auto& f : pending) {
      if (Status s = f.get(); !s) return s.error();
    }
    for (int peer = 0; peer < engine.world_size(); ++peer) {
      for (std::uint16_t k : {1, 2}) {
        const std::uint64_t want = std::uint64_t(peer) << 32 | std::uint64_t(me) << 16 | k;
        if (in[2 * peer + k - 1] != want)
          return Error{"message from rank " + std::to_string(peer) + " key " + std::to_string(k) + " mixed up"};
      }
    }
    return std::vector<std::uint8_t>{};
  });
}

TEST_CASE("a message of the wrong size fails the receive with both sizes and the peer named", "[engine]") {
  const auto reports = run_ranks(2, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    std::uint8_t bytes[16] = {};
    if (engine.rank() == 0) {
      if (Status s = wait([&](Callback cb) { engine.post_send(1, key(1), bytes, 8, cb); }); !s) return s.error();
      return std::vector<std::uint8_t>{};
    }
    const Status s = wait([&](Callback cb) { engine.post_recv(0, key(1), bytes, 16, cb); });
    if (s.ok()) return Error{"a short message was accepted"};
    return std::vector<std::uint8_t>(s.error().message.begin(), s.error().message.end());
  });
  const std::string message(reports[1].begin(), reports[1].end());
  CHECK_THAT(message, Catch::Contains("rank 0") && Catch::Contains("expected 16 bytes, got 8"));
}

TEST_CASE("a peer killed while a receive waits on it fails the receive naming it, within seconds",
          "[engine][failure]") {
  auto results = run_local_ranks(
      2,
      [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
        std::uint8_t byte = 0;
        if (engine.rank() == 0) {
          std::this_thread::sleep_for(std::chrono::milliseconds(200));
          raise(SIGKILL);
        }
        const auto start = std::chrono::steady_clock::now();
        return failure_report(start, wait([&](Callback cb) { engine.post_recv(0, key(1), &byte, 1, cb); }),
                              "a receive");
      },
      std::chrono::seconds(30));
  check_lost_within_seconds(results, 0, 1);
}

// A large send is a rendezvous, which needs the id of the peer's endpoint. Were that asked for
// only at the first large send, a peer that died before answering would never be noticed: UCX's
// keepalive skips an endpoint until the answer comes. Here the peer is stopped when the send
// starts, then killed. (The bootstrap starts no body before every rank has connected: else the
// peer could stop before taking this rank's handshake, and the connect would fail instead.)
TEST_CASE("a peer stopped, then killed, while the first large send to it starts fails the send, within seconds",
          "[engine][failure]") {
  auto results = run_local_ranks(
      2,
      [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
        std::int64_t pid = getpid();
        if (engine.rank() == 1) {
          if (Status s = wait([&](Callback cb) { engine.post_send(0, key(1), &pid, sizeof pid, cb); }); !s)
            return s.error();
          raise(SIGSTOP);
        }
        if (Status s = wait([&](Callback cb) { engine.post_recv(1, key(1), &pid, sizeof pid, cb); }); !s)
          return s.error();
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        std::vector<std::uint8_t> large(4 << 20);
        std::promise<Status> sent;
        const auto start = std::chrono::steady_clock::now();
        engine.post_send(1, key(2), large.data(), large.size(), [&sent](Status s) { sent.set_value(std::move(s)); });
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        kill(static_cast<pid_t>(pid), SIGKILL);
        return failure_report(start, sent.get_future().get(), "a large send");
      },
      std::chrono::seconds(30));
  check_lost_within_seconds(results, 1, 0);
}

TEST_CASE("the oldest receive in flight names its peer and message until it completes", "[engine]") {
  run_ranks(2, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    if (engine.rank() == 1) {
      // Rank 0 looks at its pending receive first; this send comes after the barrier message.
      std::uint64_t go = 0, payload = 42;
      if (Status s = wait([&](Callback done) { engine.post_recv(0, key(1), &go, 8, std::move(done)); }); !s)
        return s.error();
      if (Status s = wait([&](Callback done) { engine.post_send(0, key(2), &payload, 8, std::move(done)); }); !s)
        return s.error();
      return std::vector<std::uint8_t>{};
    }
    if (engine.oldest_pending_receive()) return Error{"a receive is pending before any was posted"};
    std::uint64_t go = 1, payload = 0;
    std::promise<Status> received;
    engine.post_recv(1, key(2), &payload, 8, [&](Status s) { received.set_value(std::move(s)); });
    // The post reaches the progress thread asynchronously.
    std::optional<PendingReceive> pending;
    for (int i = 0; i < 1000 && !pending; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      pending = engine.oldest_pending_receive();
    }
    if (!pending) return Error{"the posted receive is not reported as pending"};
    const std::string text = describe(*pending, std::chrono::steady_clock::now());
    if (pending->peer != 1 || !(pending->key == key(2)) || pending->bytes != 8)
      return Error{"the pending receive is reported wrongly: " + text};
    if (text.find("point-to-point message 2 of operation 0 in group 9 (8 bytes) from rank 1, waiting") != 0)
      return Error{"unexpected description: " + text};
    if (Status s = wait([&](Callback done) { engine.post_send(1, key(1), &go, 8, std::move(done)); }); !s)
      return s.error();
    if (Status s = received.get_future().get(); !s) return s.error();
    if (engine.oldest_pending_receive()) return Error{"a completed receive is still reported as pending"};
    return std::vector<std::uint8_t>{};
  });
}

TEST_CASE("the engine address is the documented wire format", "[engine]") {
  EngineAddress address;
  address.worker = {0xaa, 0xbb, 0xcc};
  address.region_key = {0x11, 0x22};
  address.region_base = 0x0102030405060708ull;
  address.region_bytes = 0x800000;
  const std::vector<std::uint8_t> want{3,    0,    0,    0,    0xaa, 0xbb, 0xcc,  // worker
                                       2,    0,    0,    0,    0x11, 0x22,        // region key
                                       0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01,  // base
                                       0,    0,    0x80, 0,    0,    0,    0,    0};   // bytes
  const auto bytes = encode_address(address);
  CHECK(bytes == want);
  auto back = decode_address(bytes);
  REQUIRE(back.ok());
  CHECK(back->worker == address.worker);
  CHECK(back->region_key == address.region_key);
  CHECK(back->region_base == address.region_base);
  CHECK(back->region_bytes == address.region_bytes);

  // No region lent: an empty key, base and size 0.
  auto bare = decode_address(encode_address(EngineAddress{{7}, {}, 0, 0}));
  REQUIRE(bare.ok());
  CHECK(bare->region_key.empty());

  // Cut short, with bytes left over, or with no worker address: refused, saying why.
  for (const auto& bad : {std::vector<std::uint8_t>(bytes.begin(), bytes.end() - 1),
                          [&] { auto longer = bytes; longer.push_back(0); return longer; }(),
                          encode_address(EngineAddress{})}) {
    const auto decoded = decode_address(bad);
    REQUIRE_FALSE(decoded.ok());
    CHECK_THAT(decoded.error().message, Catch::Contains("malformed engine address"));
  }

  auto engine = Engine::create(0, 2);
  REQUIRE(engine.ok());
  const std::vector<std::uint8_t> garbage{1, 2, 3};
  const Status refused = (*engine)->connect(1, garbage);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("cannot connect to rank 1") && Catch::Contains("malformed"));
}

namespace {

// Each rank reports, per peer, whether the peer's lent region is mapped here, and the size of
// its own blocks.
LocalRankBody report_mappings() {
  return [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    std::vector<std::uint64_t> report{engine.mapped_block_bytes()};
    for (int peer = 0; peer < engine.world_size(); ++peer) {
      if (peer != engine.rank()) report.push_back(engine.peer_region(peer).size());
    }
    return pack(report);
  };
}

}  // namespace

TEST_CASE("ranks on one host map each other's lent region, and over TCP or with no blocks none does", "[engine]") {
  const auto lent = run_ranks(3, report_mappings());
  for (const auto& report : lent) {
    const auto values = unpack<std::uint64_t>(report);
    CHECK(values[0] == static_cast<std::uint64_t>(knob_value(knob_chunk_bytes)));
    for (std::size_t i = 1; i < values.size(); ++i) {
      CHECK(values[i] == static_cast<std::uint64_t>(knob_value(knob_mapped_blocks) * knob_value(knob_chunk_bytes)));
    }
  }
  for (const auto& [name, value] : {std::pair{"UCX_TLS", "tcp,self"}, std::pair{"TROUPE_COMM_MAPPED_BLOCKS", "0"}}) {
    INFO(name << "=" << value);
    ScopedEnv env(name, value);
    for (const auto& report : run_ranks(2, report_mappings())) {
      const auto values = unpack<std::uint64_t>(report);
      CHECK(values[0] == 0);
      CHECK(values[1] == 0);
    }
  }
}

TEST_CASE("each rank names the transport its peers' data takes: shared memory on one host, TCP otherwise",
          "[engine]") {
  const LocalRankBody describe = [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    std::vector<int> peers;
    for (int peer = 0; peer < engine.world_size(); ++peer)
      if (peer != engine.rank()) peers.push_back(peer);
    const std::string line = describe_peer_transports(engine, peers);
    return std::vector<std::uint8_t>(line.begin(), line.end());
  };
  const auto text = [](const std::vector<std::uint8_t>& bytes) { return std::string(bytes.begin(), bytes.end()); };
  const auto shared = run_ranks(3, describe);
  CHECK_THAT(text(shared[0]), Catch::Matches("rank 0 reaches ranks 1, 2 through shared memory \\((sysv|posix)/memory, "
                                             "mapped blocks\\)"));
  CHECK_THAT(text(shared[1]), Catch::Matches("rank 1 reaches ranks 0, 2 through shared memory \\((sysv|posix)/memory, "
                                             "mapped blocks\\)"));
  ScopedEnv tcp("UCX_TLS", "tcp,self");
  const auto over_tcp = run_ranks(2, describe);
  CHECK_THAT(text(over_tcp[0]), Catch::Matches("rank 0 reaches rank 1 through TCP \\(tcp/[a-z0-9_.-]+\\)"));
  CHECK_THAT(text(over_tcp[1]), Catch::Matches("rank 1 reaches rank 0 through TCP \\(tcp/[a-z0-9_.-]+\\)"));
}

TEST_CASE("transport names map to the words a log reader knows", "[engine]") {
  CHECK(transport_kind("sysv/memory") == "shared memory");
  CHECK(transport_kind("posix/memory,cma/memory") == "shared memory");
  CHECK(transport_kind("tcp/eth0") == "TCP");
  CHECK(transport_kind("rc_mlx5/mlx5_0:1") == "InfiniBand");
  CHECK(transport_kind("self/memory") == "this process");
  CHECK(transport_kind("ugni_rdma/gemini") == "ugni_rdma/gemini");
}

namespace {

// One length-prefixed address through a pipe, between a forked rank and the test.
void write_address(int fd, const std::vector<std::uint8_t>& address) {
  const std::uint32_t bytes = static_cast<std::uint32_t>(address.size());
  REQUIRE(::write(fd, &bytes, sizeof bytes) == static_cast<ssize_t>(sizeof bytes));
  REQUIRE(::write(fd, address.data(), bytes) == static_cast<ssize_t>(bytes));
}

std::vector<std::uint8_t> read_address(int fd) {
  std::uint32_t bytes = 0;
  if (::read(fd, &bytes, sizeof bytes) != static_cast<ssize_t>(sizeof bytes)) return {};
  std::vector<std::uint8_t> address(bytes);
  std::size_t got = 0;
  while (got < bytes) {
    const ssize_t n = ::read(fd, address.data() + got, bytes - got);
    if (n <= 0) return {};
    got += static_cast<std::size_t>(n);
  }
  return address;
}

// Sends `value` from `from` to `to` under key `index` (the receive posted first); the byte received.
std::uint8_t pass_byte(Engine& from, Engine& to, std::uint16_t index, std::uint8_t value) {
  std::uint8_t received = 0;
  std::promise<Status> arrived;
  to.post_recv(from.rank(), key(index), &received, 1, [&arrived](Status s) { arrived.set_value(std::move(s)); });
  REQUIRE(wait([&](Callback cb) { from.post_send(to.rank(), key(index), &value, 1, cb); }).ok());
  REQUIRE(arrived.get_future().get().ok());
  return received;
}

// Forks a process for rank 1 of 2: it creates its engine, writes its address to `address_fd`, runs
// `then` and exits. Returns the child's pid.
pid_t fork_rank_one(int address_fd, const std::function<void(Engine&)>& then) {
  const pid_t child = ::fork();
  if (child != 0) return child;
  auto engine = Engine::create(1, 2);
  if (!engine) ::_exit(3);
  write_address(address_fd, (*engine)->address());
  then(**engine);
  ::_exit(6);
}

}  // namespace

TEST_CASE("a killed peer's replacement is connected afresh: the old endpoint fails, the new one carries messages",
          "[engine][failure]") {
  int to_child[2], to_test[2];
  REQUIRE(::pipe(to_child) == 0);
  REQUIRE(::pipe(to_test) == 0);
  // Rank 1's first process: connects, says one byte, then waits to be killed.
  const pid_t child = fork_rank_one(to_test[1], [&](Engine& engine) {
    const std::vector<std::uint8_t> rank0 = read_address(to_child[0]);
    if (rank0.empty() || !engine.connect(0, rank0)) ::_exit(4);
    std::uint8_t byte = 7;
    if (!wait([&](Callback cb) { engine.post_send(0, key(1), &byte, 1, cb); })) ::_exit(5);
    ::pause();
  });
  REQUIRE(child >= 0);
  auto survivor = Engine::create(0, 2);
  REQUIRE(survivor.ok());
  Engine& rank0 = **survivor;
  write_address(to_child[1], rank0.address());
  const std::vector<std::uint8_t> first = read_address(to_test[0]);
  REQUIRE(!first.empty());
  REQUIRE(rank0.connect(1, first).ok());
  std::uint8_t byte = 0;
  REQUIRE(wait([&](Callback cb) { rank0.post_recv(1, key(1), &byte, 1, cb); }).ok());
  CHECK(byte == 7);
  CHECK(rank0.connected(1));

  ::kill(child, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  const Status lost = wait([&](Callback cb) { rank0.post_recv(1, key(2), &byte, 1, cb); });
  REQUIRE_FALSE(lost.ok());
  CHECK_THAT(lost.error().message, Catch::Contains("rank 1 lost"));
  CHECK_FALSE(rank0.connected(1));

  // The replacement: a new process's engine for rank 1 (here, a second engine in this process).
  auto replacement = Engine::create(1, 2);
  REQUIRE(replacement.ok());
  Engine& rank1 = **replacement;
  REQUIRE(rank0.connect(1, rank1.address()).ok());
  REQUIRE(rank1.connect(0, rank0.address()).ok());
  CHECK(rank0.connected(1));
  CHECK(rank0.peer_region(1).empty() == rank1.peer_region(0).empty());
  CHECK(pass_byte(rank1, rank0, 3, 11) == 11);
  CHECK(pass_byte(rank0, rank1, 4, 13) == 13);
}

TEST_CASE("connect of several peers at once connects each of them, or names the one that cannot be", "[engine]") {
  std::vector<std::unique_ptr<Engine>> engines;
  for (int rank = 0; rank < 4; ++rank) {
    auto engine = Engine::create(rank, 4);
    REQUIRE(engine.ok());
    engines.push_back(std::move(*engine));
  }
  std::vector<Engine::PeerAddress> peers;
  for (int rank = 1; rank < 4; ++rank) peers.push_back({rank, engines[static_cast<std::size_t>(rank)]->address()});
  REQUIRE(engines[0]->connect(peers).ok());
  for (int rank = 1; rank < 4; ++rank) {
    Engine& peer = *engines[static_cast<std::size_t>(rank)];
    REQUIRE(peer.connect(0, engines[0]->address()).ok());
    CHECK(engines[0]->connected(rank));
    CHECK(pass_byte(*engines[0], peer, static_cast<std::uint16_t>(rank), static_cast<std::uint8_t>(rank)) == rank);
    CHECK(pass_byte(peer, *engines[0], static_cast<std::uint16_t>(10 + rank), static_cast<std::uint8_t>(rank)) == rank);
  }
  // A malformed address among them: refused before any handshake, naming its rank.
  const std::vector<std::uint8_t> garbage{1, 2, 3};
  const std::vector<Engine::PeerAddress> bad{{2, engines[2]->address()}, {3, garbage}};
  const Status refused = engines[1]->connect(bad);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.error().message, Catch::Contains("cannot connect to rank 3") && Catch::Contains("malformed"));
  CHECK_FALSE(engines[1]->connected(2));
}

TEST_CASE("a peer that does not take the handshake in time fails connect, naming it and the wait",
          "[engine][failure]") {
  // connect() itself; and a peer introduced, at the first receive from it, which fails.
  ScopedEnv short_wait("TROUPE_COMM_HANDSHAKE_S", "1");
  for (const bool first_use : {false, true}) {
    INFO((first_use ? "first use" : "connect"));
    int to_test[2];
    REQUIRE(::pipe(to_test) == 0);
    // Rank 1: hands out its address, then stops before its engine can take anything.
    const pid_t child = fork_rank_one(to_test[1], [](Engine&) { ::raise(SIGSTOP); });
    REQUIRE(child >= 0);
    auto survivor = Engine::create(0, 2);
    REQUIRE(survivor.ok());
    const std::vector<std::uint8_t> address = read_address(to_test[0]);
    REQUIRE(!address.empty());
    int status = 0;
    REQUIRE(::waitpid(child, &status, WUNTRACED) == child);
    REQUIRE(WIFSTOPPED(status));
    const auto start = std::chrono::steady_clock::now();
    std::uint8_t byte = 0;
    const Status connected = first_use
                                 ? ((*survivor)->introduce(1, address).ok()
                                        ? wait([&](Callback cb) { (*survivor)->post_recv(1, key(1), &byte, 1, cb); })
                                        : Status{Error{"introduce refused the address"}})
                                 : (*survivor)->connect(1, address);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ::kill(child, SIGKILL);
    REQUIRE(::waitpid(child, &status, 0) == child);
    REQUIRE_FALSE(connected.ok());
    CHECK_THAT(connected.error().message,
               Catch::StartsWith("comm: cannot connect to rank 1: it did not take the handshake within 1 s"));
    if (!first_use)
      CHECK(connected.error().message == "comm: cannot connect to rank 1: it did not take the handshake within 1 s");
    CHECK(seconds >= 1.0);
    CHECK(seconds < 5.0);
    CHECK_FALSE((*survivor)->connected(1));
  }
}

TEST_CASE("connecting a live peer again replaces its endpoint: what waited on the old one fails naming it",
          "[engine]") {
  // connect() replaces it at once; introduce() with the new address too, connecting on first use.
  for (const bool introduce : {false, true}) {
    INFO((introduce ? "introduce" : "connect"));
    auto a = Engine::create(0, 2), b = Engine::create(1, 2);
    REQUIRE((a.ok() && b.ok()));
    REQUIRE((*a)->connect(1, (*b)->address()).ok());
    REQUIRE((*b)->connect(0, (*a)->address()).ok());
    std::uint8_t byte = 0;
    std::promise<Status> waiting;
    (*a)->post_recv(1, key(1), &byte, 1, [&waiting](Status s) { waiting.set_value(std::move(s)); });
    auto replacement = Engine::create(1, 2);
    REQUIRE(replacement.ok());
    const auto address = (*replacement)->address();
    REQUIRE((introduce ? (*a)->introduce(1, address) : (*a)->connect(1, address)).ok());
    const Status old = waiting.get_future().get();
    REQUIRE_FALSE(old.ok());
    CHECK_THAT(old.error().message, Catch::Contains("rank 1"));
    CHECK((*a)->connected(1) == !introduce);
    REQUIRE(
        (introduce ? (*replacement)->introduce(0, (*a)->address()) : (*replacement)->connect(0, (*a)->address())).ok());
    CHECK(pass_byte(**replacement, **a, 2, 5) == 5);
    CHECK((*a)->connected(1));
  }
}

TEST_CASE("a peer introduced, not connected, is connected by the first message to or from it, its region unmapped",
          "[engine]") {
  auto a = Engine::create(0, 2), b = Engine::create(1, 2);
  REQUIRE((a.ok() && b.ok()));
  REQUIRE((*a)->introduce(1, (*b)->address()).ok());
  REQUIRE((*b)->introduce(0, (*a)->address()).ok());
  CHECK_FALSE((*a)->connected(1));
  CHECK_FALSE((*b)->connected(0));
  CHECK(pass_byte(**a, **b, 1, 9) == 9);
  CHECK((*a)->connected(1));  // by its send
  CHECK((*b)->connected(0));  // by its receive
  CHECK((*a)->peer_region(1).empty());
  CHECK((*b)->peer_region(0).empty());
  CHECK(pass_byte(**b, **a, 2, 4) == 4);
  // The address it has is nothing new: the endpoint stays.
  REQUIRE((*a)->introduce(1, (*b)->address()).ok());
  CHECK(pass_byte(**a, **b, 3, 6) == 6);
  CHECK_FALSE((*a)->introduce(2, (*b)->address()).ok());
  const std::vector<std::uint8_t> garbage{1, 2, 3};
  CHECK_FALSE((*a)->introduce(1, garbage).ok());
}
