// A context group's exchanges as a worker makes them, between real processes over UCX: ring
// shifts and all-to-alls move each rank's blocks, and a lost peer ends the wait with CommFailed
// (what a worker answers by waiting for the job's recovery order), never a plain error.

#include <catch2/catch.hpp>

#include <csignal>
#include <cstring>
#include <thread>
#include <vector>

#include "actors/worker/mailbox_context_exchange.hpp"
#include "actors/worker/two_rank_mailboxes.hpp"
#include "comm/grid.hpp"

using namespace troupe;
using namespace troupe::actors;

namespace {

std::span<const std::byte> bytes_of(const std::vector<float>& v) { return std::as_bytes(std::span(v)); }
std::span<std::byte> writable_bytes_of(std::vector<float>& v) { return std::as_writable_bytes(std::span(v)); }

}  // namespace

TEST_CASE("a context group's ring shift and all-to-all move each rank's blocks, and renew starts its keys afresh",
          "[actors]") {
  on_two_ranks([](comm::Engine& engine, MailboxComm& mailbox, comm::Communicator& world) -> Status {
    const int r = engine.rank();
    MailboxContextExchange exchange(mailbox, engine, comm::context_group(comm::Grid{2, 1, 1}, r, 2));
    for (int epoch : {0, 1}) {
      if (epoch == 1) exchange.renew(1);
      const std::vector<float> mine{10.0f * r + epoch, 10.0f * r + 1};
      std::vector<float> next(2);
      if (Status s = exchange.begin_shift(bytes_of(mine), writable_bytes_of(next)); !s) return s;
      if (Status s = exchange.finish_shift(); !s) return s;
      if (next[0] != 10.0f * (1 - r) + epoch) return Error{"the ring shift brought " + std::to_string(next[0])};
      // Block j of every rank's send goes to rank j.
      const std::vector<float> send{100.0f * r, 100.0f * r + 1};
      std::vector<float> got(2);
      if (Status s = exchange.all_to_all(bytes_of(send), writable_bytes_of(got)); !s) return s;
      if (got[static_cast<std::size_t>(r)] != 100.0f * r + r ||
          got[static_cast<std::size_t>(1 - r)] != 100.0f * (1 - r) + r)
        return Error{"the all-to-all brought " + std::to_string(got[0]) + ", " + std::to_string(got[1])};
    }
    return world.barrier();
  });
}

TEST_CASE("an uneven all-to-all moves blocks of each pair's own size, an empty one included", "[actors][moe]") {
  on_two_ranks([](comm::Engine& engine, MailboxComm& mailbox, comm::Communicator& world) -> Status {
    const int r = engine.rank();
    MailboxContextExchange exchange(mailbox, engine, comm::expert_group(comm::Grid{2, 1, 1}, r, 2),
                                    comm::ExchangeGroup::expert);
    // Counts first: rank 0 sends rank 1 three values, rank 1 sends rank 0 none; each keeps one.
    const std::vector<std::int64_t> counts = r == 0 ? std::vector<std::int64_t>{1, 3} : std::vector<std::int64_t>{0, 1};
    Expected<std::vector<std::int64_t>> got_counts = compute::context::exchange_counts(exchange, counts);
    if (!got_counts) return got_counts.error();
    const std::vector<std::int64_t> want_counts =
        r == 0 ? std::vector<std::int64_t>{1, 0} : std::vector<std::int64_t>{3, 1};
    if (*got_counts != want_counts) return Error{"the counts did not arrive as sent"};
    std::vector<float> send;
    for (std::int64_t i = 0; i < counts[0] + counts[1]; ++i) send.push_back(100.0f * r + static_cast<float>(i));
    std::vector<float> got(static_cast<std::size_t>((*got_counts)[0] + (*got_counts)[1]));
    auto bytes = [](const std::vector<std::int64_t>& c) {
      return std::vector<std::size_t>{static_cast<std::size_t>(c[0]) * 4, static_cast<std::size_t>(c[1]) * 4};
    };
    if (Status s =
            exchange.all_to_all_uneven(bytes_of(send), bytes(counts), writable_bytes_of(got), bytes(*got_counts));
        !s)
      return s;
    const std::vector<float> want = r == 0 ? std::vector<float>{0.0f} : std::vector<float>{1.0f, 2.0f, 3.0f, 100.0f};
    if (got != want) return Error{"the uneven all-to-all brought " + std::to_string(got.size()) + " values"};
    // Counted as an expert group's: two all-to-alls, the bytes sent off the rank (rank 0: a count of 8
    // bytes and three values; rank 1: a count), none as a context group's.
    const comm::Traffic& traffic = *engine.traffic();
    const std::uint64_t sent = r == 0 ? 8 + 12 : 8;
    if (traffic.expert_totals().operations != 2 || traffic.expert_totals().bytes != sent)
      return Error{"the expert traffic counted " + std::to_string(traffic.expert_totals().operations.load()) +
                   " all-to-alls of " + std::to_string(traffic.expert_totals().bytes.load()) + " bytes"};
    if (traffic.context_totals(comm::ContextTraffic::all_to_all).operations != 0)
      return Error{"an expert group's all-to-all counted as a context group's"};
    return world.barrier();
  });
}

TEST_CASE(
    "an all-to-all begun travels while the rank computes and shifts, lands by finish_all_to_all, and a second "
    "begun before it ends is refused",
    "[actors][moe]") {
  on_two_ranks([](comm::Engine& engine, MailboxComm& mailbox, comm::Communicator& world) -> Status {
    const int r = engine.rank();
    MailboxContextExchange exchange(mailbox, engine, comm::expert_group(comm::Grid{2, 1, 1}, r, 2),
                                    comm::ExchangeGroup::expert);
    const std::vector<float> send{100.0f * r, 100.0f * r + 1};
    std::vector<float> got(2, -1.0f);
    const std::vector<std::size_t> blocks{4, 4};
    if (Status s = exchange.begin_all_to_all(bytes_of(send), blocks, writable_bytes_of(got), blocks); !s) return s;
    if (exchange.begin_all_to_all(bytes_of(send), blocks, writable_bytes_of(got), blocks))
      return Error{"a second all-to-all began while the first was in flight"};
    // A ring shift begun and finished meanwhile, as the MoE block's compute would go on.
    const std::vector<float> mine{7.0f + r};
    std::vector<float> next(1);
    if (Status s = exchange.begin_shift(bytes_of(mine), writable_bytes_of(next)); !s) return s;
    if (Status s = exchange.finish_shift(); !s) return s;
    if (next[0] != 7.0f + (1 - r)) return Error{"the shift brought " + std::to_string(next[0])};
    if (Status s = exchange.finish_all_to_all(); !s) return s;
    if (got[static_cast<std::size_t>(r)] != 100.0f * r + r ||
        got[static_cast<std::size_t>(1 - r)] != 100.0f * (1 - r) + r)
      return Error{"the all-to-all brought " + std::to_string(got[0]) + ", " + std::to_string(got[1])};
    if (exchange.finish_all_to_all()) return Error{"finish_all_to_all ended an all-to-all that was not in flight"};
    return world.barrier();
  });
}

TEST_CASE("a context exchange whose peer is lost throws CommFailed naming it, so the worker waits for the job's order",
          "[actors]") {
  for (const bool ring : {true, false}) {
    INFO((ring ? "ring shift" : "all-to-all"));
    auto results = run_two_rank_mailboxes(
        [ring](comm::Engine& engine, MailboxComm& mailbox,
               comm::Communicator& world) -> Expected<std::vector<std::uint8_t>> {
          MailboxContextExchange exchange(mailbox, engine, comm::context_group(comm::Grid{2, 1, 1}, engine.rank(), 2));
          if (Status s = world.barrier(); !s) return s.error();
          if (engine.rank() == 1) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            raise(SIGKILL);
          }
          // Rank 1's block never comes: its process is gone.
          std::vector<float> send(2, 1.0f), recv(2);
          try {
            if (ring) {
              if (Status s = exchange.begin_shift(bytes_of(send), writable_bytes_of(recv)); !s) return s.error();
              const Status s = exchange.finish_shift();
              return Error{"the ring shift ended without its peer: " + (s ? std::string("ok") : s.error().message)};
            }
            const Status s = exchange.all_to_all(bytes_of(send), writable_bytes_of(recv));
            return Error{"the all-to-all ended without its peer: " + (s ? std::string("ok") : s.error().message)};
          } catch (const CommFailed& failed) {
            const std::string what = failed.what();
            return std::vector<std::uint8_t>(what.begin(), what.end());
          }
        },
        std::chrono::seconds(30));
    REQUIRE(results);
    CHECK((*results)[1].signal == SIGKILL);
    const comm::LocalRankResult& survivor = (*results)[0];
    INFO(survivor.error);
    REQUIRE(survivor.ok);
    CHECK_THAT(std::string(survivor.report.begin(), survivor.report.end()), Catch::Contains("rank 1 lost"));
  }
}

// A worker that takes an order in a wait gives its step up: its stack unwinds and frees the
// context attention's buffers before the recovery abandons the transfers. A peer's block that
// lands meanwhile must land in the exchange's own buffer, never in the caller's memory (which is
// then the heap's again: a survivor's heap was corrupted so).
TEST_CASE("a ring shift or all-to-all given up before its finish leaves the caller's buffers untouched by a late block",
          "[actors][context]") {
  for (const bool ring : {true, false}) {
    INFO((ring ? "ring shift" : "all-to-all"));
    on_two_ranks([ring](comm::Engine& engine, MailboxComm& mailbox, comm::Communicator& world) -> Status {
      const int r = engine.rank();
      MailboxContextExchange exchange(mailbox, engine, comm::context_group(comm::Grid{2, 1, 1}, r, 2));
      const std::vector<float> send(ring ? 4 : 8, 1.0f + r);
      std::vector<float> recv(send.size(), -7.0f);
      const auto begin = [&] {
        if (ring) return exchange.begin_shift(bytes_of(send), writable_bytes_of(recv));
        const std::vector<std::size_t> blocks{16, 16};
        return exchange.begin_all_to_all(bytes_of(send), blocks, writable_bytes_of(recv), blocks);
      };
      const auto finish = [&] { return ring ? exchange.finish_shift() : exchange.finish_all_to_all(); };
      if (Status s = begin(); !s) return s;
      if (r == 1) {
        if (Status s = finish(); !s) return s;  // rank 0's block came, and rank 1's went
        return world.barrier();
      }
      // Rank 0 gives its exchange up unfinished; rank 1's block reaches it meanwhile.
      if (Status s = world.barrier(); !s) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
      for (std::size_t i = 0; i < recv.size(); ++i)
        if (recv[i] != -7.0f)
          return Error{"element " + std::to_string(i) + " of the caller's receive became " + std::to_string(recv[i])};
      mailbox.abandon_transfers();
      exchange.renew(1);
      return Status::success();
    });
  }
}
