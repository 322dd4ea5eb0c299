// DiLoCo's survivors settling an outer sync in flight when an island was lost
// (actors/worker/island_membership.hpp): three islands of one rank, each in its own process with a
// worker's mailbox and its outer group over UCX. The test plays the job: it puts the order leaving
// island 2 out, and the settle's table of the outer sums each rank applied (which the job builds from
// the ranks' islands_applied_msg), in the mailboxes of islands 0 and 1; the ranks' reports go to an
// actor that drops them.

#include <catch2/catch.hpp>

#include <csignal>
#include <exception>
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>

#include "actors/actor_system_setup.hpp"
#include "actors/worker/island_membership.hpp"
#include "comm/bootstrap.hpp"
#include "comm/grid.hpp"
#include "monitor/work_progress.hpp"

using namespace troupe;
using namespace troupe::actors;

namespace {

constexpr int kIslands = 3;
constexpr std::int64_t kElements = 4096;

// Island r's pseudo-gradient: r + 1 + i / 8, exact in f32, so every sum of them is exact too.
compute::Tensor pseudo_gradient(int island) {
  compute::Tensor t = compute::Tensor::zeros({kElements}, compute::DType::f32);
  for (std::int64_t i = 0; i < kElements; ++i)
    t.data_as<float>()[i] = static_cast<float>(island + 1) + static_cast<float>(i) / 8.0f;
  return t;
}

// Whether `sum` holds the pseudo-gradients of the islands in `present` added.
bool sums_islands(const compute::Tensor& sum, std::initializer_list<int> present) {
  for (std::int64_t i = 0; i < kElements; ++i) {
    float expected = 0;
    for (int island : present) expected += static_cast<float>(island + 1) + static_cast<float>(i) / 8.0f;
    if (sum.data_as<float>()[i] != expected) return false;
  }
  return true;
}

// One rank's part: its data plane, the outer step's hooks over its membership (the job leaves
// islands out), its mailbox, and the actor its reports go to.
struct IslandRank {
  comm::Engine& engine;
  compute::IslandGroup& group;
  const IslandMembership& membership;
  MailboxComm& mailbox;
  caf::scoped_actor& self;
  caf::actor job;
};

// Runs `body` on the three islands' ranks; each rank's failure fails the test.
void on_three_islands(const std::function<Status(IslandRank&)>& body) {
  auto results = comm::run_local_ranks(
      kIslands,
      [&body](comm::Engine& engine) -> Expected<std::vector<std::uint8_t>> {
        TroupeConfig cfg;
        caf::actor_system system{cfg};
        caf::scoped_actor self{system};
        MailboxComm mailbox(self.ptr());
        const comm::Grid grid{kIslands, 1, 1};
        auto outer = comm::Communicator::create(engine, comm::outer_group(grid, engine.rank(), kIslands));
        if (!outer) return outer.error();
        monitor::WorkProgress progress;
        IslandMembership membership(mailbox, engine, progress, grid, kIslands, compute::OuterPrecision::f32,
                                    std::move(*outer), true);
        compute::IslandGroup group = membership.group();
        const caf::actor job =
            system.spawn([]() -> caf::behavior { return {[](recover_atom, const islands_applied_msg&) {}}; });
        IslandRank rank{engine, group, membership, mailbox, self, job};
        const Status s = body(rank);
        caf::anon_send_exit(job, caf::exit_reason::user_shutdown);
        if (!s) return s.error();
        return std::vector<std::uint8_t>{1};
      },
      std::chrono::seconds(60));
  REQUIRE(results);
  for (int rank = 0; rank < 2; ++rank) {
    INFO("rank " << rank << ": " << (*results)[rank].error);
    CHECK((*results)[rank].ok);
  }
  // Island 2's process is lost: killed, or (lost before its sum) it returned at once.
  CHECK(((*results)[2].signal == SIGKILL || (*results)[2].ok));
}

// The job's order that leaves island 2 out (epoch 1), in this rank's mailbox, taken between steps.
void order_island_2_left_out(IslandRank& r) {
  r.self->send(r.self, recover_atom_v, islands_msg{1, {0, 1}, {}, {}, r.job, {}, {}});
  r.group.between_steps();
}

// The settle's table after it: the outer sums ranks 0 and 1 applied (each over three islands), in
// this rank's mailbox, taken between steps.
void settle_table(IslandRank& r, std::int64_t applied_0, std::int64_t applied_1) {
  r.self->send(
      r.self, recover_atom_v,
      islands_msg{
          1, {0, 1}, {}, {}, r.job, {applied_0, applied_1, -1}, {applied_0 > 0 ? 3 : 0, applied_1 > 0 ? 3 : 0, -1}});
  r.group.between_steps();
}

// A word from one rank to another, outside the outer group: a rank leaves its process only once
// what it sent was taken, so that its data plane has pushed it out.
comm::MessageKey word_key(int from, int to) {
  return {comm::MessageKind::point_to_point, 9, 0, static_cast<std::uint16_t>(from * kIslands + to)};
}
Status send_word(IslandRank& r, int to) {
  return r.mailbox.wait(
      r.mailbox.send(r.engine, to, word_key(r.engine.rank(), to), compute::Tensor::zeros({1}, compute::DType::f32)));
}
Status wait_word(IslandRank& r, int from) {
  return r.mailbox.wait(r.mailbox.recv(r.engine, from, word_key(from, r.engine.rank()),
                                       compute::Tensor::zeros({1}, compute::DType::f32)));
}

Status expect(bool holds, const std::string& what) { return holds ? Status{} : Status{Error{what}}; }

// The rank lands its sum and its island agrees: whether the land returned `summed` islands, the
// agreement `agreed`, and `sum` holds the pseudo-gradients of the islands `summed_islands`.
Status lands(IslandRank& r, const compute::Tensor& sum, int summed, int agreed,
             std::initializer_list<int> summed_islands) {
  const int landed = r.group.wait_sum();
  const int agreement = r.group.agree();
  const std::string who = "rank " + std::to_string(r.engine.rank());
  if (Status s = expect(landed == summed && agreement == agreed,
                        who + ": " + std::to_string(landed) + " / " + std::to_string(agreement) + " islands");
      !s)
    return s;
  return expect(sums_islands(sum, summed_islands), who + "'s sum is not the islands' it should hold");
}

// Island 2 is lost before it posts sync 1: this rank (of island 0 or 1) posts its pseudo-gradient,
// then takes the order leaving island 2 out. The pseudo-gradient, which the ring adds into.
compute::Tensor posted_then_island_2_left_out(IslandRank& r) {
  compute::Tensor mine = pseudo_gradient(r.engine.rank());
  r.group.start_sum(mine, 2);
  order_island_2_left_out(r);
  return mine;
}

Status settled_none(IslandRank& r) {
  return expect(r.membership.sums_settled() == 0,
                "rank " + std::to_string(r.engine.rank()) + ": a sum settled where none was applied");
}

}  // namespace

// All three islands post sync 1 and island 2 is then lost. Island 0 lands it over the three and
// applies it; the job's orders reach island 1 before it waited for its own sum, so the renewal gives
// that sum up. The table says island 0 is a sum ahead: island 0 sends its kept sum when it takes the
// table between its steps, and island 1, its agreement failed, takes that sum (the same bits its own
// ring would have given) and applies it as summed over three islands, not again over two, so both
// islands go on from the same outer step.
TEST_CASE(
    "diloco's survivors settle a sync in flight: an island that applied it hands its sum to one whose renewal gave "
    "it up, which applies that sum over every island instead of summing again",
    "[actors][diloco]") {
  on_three_islands([](IslandRank& r) -> Status {
    const int rank = r.engine.rank();
    compute::Tensor mine = pseudo_gradient(rank);
    r.group.start_sum(mine, 2);
    if (rank == 2) {
      // Lost once island 0 landed the sum (its part of the ring sent): it never waits for its own.
      if (Status s = wait_word(r, 0); !s) return s;
      ::raise(SIGKILL);
    }
    if (rank == 1) {
      // Island 0 applied the sum (so this rank's part of the ring was sent); then the job's orders.
      if (Status s = wait_word(r, 0); !s) return s;
      order_island_2_left_out(r);
      settle_table(r, 1, 0);
    }
    if (Status s = lands(r, mine, rank == 0 ? 3 : 0, 3, {0, 1, 2}); !s) return s;
    const std::string who = "rank " + std::to_string(rank);
    if (rank == 0) {
      for (int to : {1, 2})
        if (Status s = send_word(r, to); !s) return s;
      // The orders between its next steps: this rank's kept sum to island 1, which says when it has it.
      order_island_2_left_out(r);
      settle_table(r, 1, 0);
      if (Status s = wait_word(r, 1); !s) return s;
    }
    if (rank == 1)
      if (Status s = send_word(r, 0); !s) return s;
    return expect(r.membership.sums_settled() == (rank == 1 ? 1 : 0),
                  who + " settled " + std::to_string(r.membership.sums_settled()) + " sum(s)");
  });
}

// Island 2 is lost before it posts sync 1: the sums of islands 0 and 1 cannot land over three. The
// job's order gives both up; the table says neither applied it, so each takes its sum again, from
// the copy kept when it was first posted, over the two islands present.
TEST_CASE(
    "diloco's survivors settle a sync in flight: where no island present applied it, each takes it again over the "
    "islands present",
    "[actors][diloco]") {
  on_three_islands([](IslandRank& r) -> Status {
    if (r.engine.rank() == 2) return {};  // lost before its sum
    const compute::Tensor mine = posted_then_island_2_left_out(r);
    settle_table(r, 0, 0);
    if (Status s = lands(r, mine, 0, 2, {0, 1}); !s) return s;
    return settled_none(r);
  });
}

// The table of a settle can come after the lost island rejoined: the rejoin renews the rank's
// outer group over every island (here a renewal order over all three stands for it) before the
// table of the left-out epoch arrives. The source reads that table over the islands present in
// its epoch: island 2, absent from it (−1), is not a rank it owes sums to.
TEST_CASE(
    "diloco's survivors settle a sync in flight: a table that comes after the lost island rejoined is read over the "
    "islands present in its epoch",
    "[actors][diloco]") {
  on_three_islands([](IslandRank& r) -> Status {
    if (r.engine.rank() == 2) return {};  // lost before its sum
    posted_then_island_2_left_out(r);
    r.self->send(r.self, recover_atom_v, islands_msg{2, {0, 1, 2}, {}, {}, r.job, {}, {}});
    r.group.between_steps();
    try {
      settle_table(r, 0, 0);
    } catch (const std::exception& e) {
      return Error{"rank " + std::to_string(r.engine.rank()) + " took the table: " + e.what()};
    }
    return settled_none(r);
  });
}
