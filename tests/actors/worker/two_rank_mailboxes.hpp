#pragma once
// Two ranks, each in its own process with a worker's mailbox, for the tests of a worker's data plane.

#include <catch2/catch.hpp>

#include <functional>

#include "actors/actor_system_setup.hpp"
#include "actors/worker/mailbox_comm.hpp"
#include "comm/bootstrap.hpp"
#include "comm/grid.hpp"

namespace troupe::actors {

using MailboxRankBody =
    std::function<Expected<std::vector<std::uint8_t>>(comm::Engine&, MailboxComm&, comm::Communicator&)>;

// Runs `body` on two ranks, each in its own process with a worker's mailbox and the ranks' world
// communicator; how each rank's process ended (its report, or the signal that ended it).
inline Expected<std::vector<comm::LocalRankResult>> run_two_rank_mailboxes(const MailboxRankBody& body,
                                                                           std::chrono::seconds timeout) {
  return comm::run_local_ranks(
      2,
      [&body](comm::Engine& engine) -> Expected<std::vector<std::uint8_t>> {
        TroupeConfig cfg;
        caf::actor_system system{cfg};
        caf::scoped_actor self{system};
        MailboxComm mailbox(self.ptr());
        auto comm = comm::Communicator::create(engine, comm::world_group(comm::Grid{2, 1, 1}));
        if (!comm) return comm.error();
        return body(engine, mailbox, **comm);
      },
      timeout);
}

// The same where both ranks must succeed: each rank's returned failure fails the test.
inline void on_two_ranks(const std::function<Status(comm::Engine&, MailboxComm&, comm::Communicator&)>& body) {
  auto results = run_two_rank_mailboxes(
      [&body](comm::Engine& engine, MailboxComm& mailbox,
              comm::Communicator& world) -> Expected<std::vector<std::uint8_t>> {
        if (Status s = body(engine, mailbox, world); !s) return s.error();
        return std::vector<std::uint8_t>{1};
      },
      std::chrono::seconds(60));
  REQUIRE(results);
  for (const auto& r : *results) {
    INFO(r.error);
    CHECK(r.ok);
  }
}

}  // namespace troupe::actors
