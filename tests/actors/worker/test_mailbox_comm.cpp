// A worker's data plane: transfers and collectives posted through MailboxComm complete as
// messages in the posting actor's mailbox, between real processes over UCX.

#include <catch2/catch.hpp>

#include <cstring>
#include <functional>

#include "actors/worker/mailbox_comm.hpp"
#include "actors/worker/two_rank_mailboxes.hpp"
#include "comm/grid.hpp"

using namespace troupe;
using namespace troupe::actors;

namespace {

comm::MessageKey key(std::uint16_t index) { return {comm::MessageKind::point_to_point, 7, 0, index}; }

compute::Tensor filled(std::int64_t n, float base) {
  compute::Tensor t = compute::Tensor::zeros({n}, compute::DType::f32);
  for (std::int64_t i = 0; i < n; ++i) t.data_as<float>()[i] = base + static_cast<float>(i);
  return t;
}

}  // namespace

TEST_CASE("transfers and collectives complete as messages to the posting actor, waited for one by one", "[actors]") {
  on_two_ranks([](comm::Engine& engine, MailboxComm& mailbox, comm::Communicator& world) -> Status {
    const int peer = 1 - engine.rank();
    // Two messages each way; each rank waits for the second first, so a completion that
    // arrives before its wait must be kept for it.
    compute::Tensor in1 = compute::Tensor::zeros({1000}, compute::DType::f32);
    compute::Tensor in2 = compute::Tensor::zeros({3}, compute::DType::f32);
    auto r1 = mailbox.recv(engine, peer, key(1), in1);
    auto r2 = mailbox.recv(engine, peer, key(2), in2);
    mailbox.send(engine, peer, key(1), filled(1000, 10.0f * engine.rank()));
    mailbox.send(engine, peer, key(2), filled(3, 100.0f + engine.rank()));
    if (Status s = mailbox.wait(r2); !s) return s;
    if (in2.data_as<float>()[2] != 102.0f + peer) return Error{"second message has the wrong contents"};
    if (Status s = mailbox.wait(r1); !s) return s;
    if (in1.data_as<float>()[999] != 10.0f * peer + 999.0f) return Error{"first message has the wrong contents"};
    compute::Tensor sum = filled(5, static_cast<float>(engine.rank()));
    mailbox.all_reduce(world, sum);
    if (Status s = mailbox.wait_all(); !s) return s;
    if (sum.data_as<float>()[4] != 9.0f) return Error{"all-reduce result " + std::to_string(sum.data_as<float>()[4])};
    return {};
  });
}

TEST_CASE("an operation set apart is left to its own wait: wait_all neither waits for it nor takes its outcome",
          "[actors]") {
  on_two_ranks([](comm::Engine& engine, MailboxComm& mailbox, comm::Communicator& world) -> Status {
    const int peer = 1 - engine.rank();
    // The peer sends this only after its wait_all: were the receive not set apart, both ranks'
    // wait_all would wait for it, and for each other, for ever.
    compute::Tensor later = compute::Tensor::zeros({3}, compute::DType::f32);
    const MailboxComm::Operation apart = mailbox.recv(engine, peer, key(5), later);
    mailbox.set_apart(apart);
    compute::Tensor sum = filled(3, 1.0f);
    mailbox.all_reduce(world, sum);
    if (Status s = mailbox.wait_all(); !s) return s;
    if (sum.data_as<float>()[0] != 2.0f) return Error{"all-reduce result " + std::to_string(sum.data_as<float>()[0])};
    mailbox.send(engine, peer, key(5), filled(3, 40.0f + engine.rank()));
    if (Status s = mailbox.wait(apart); !s) return s;
    if (later.data_as<float>()[0] != 40.0f + peer) return Error{"the receive set apart got the wrong contents"};
    return mailbox.wait_all();
  });
}

TEST_CASE("abandoned transfers are cancelled and forgotten: drain returns, and a late message of the abandoned key "
          "never lands in a transfer under the next key",
          "[actors]") {
  on_two_ranks([](comm::Engine& engine, MailboxComm& mailbox, comm::Communicator& world) -> Status {
    const int peer = 1 - engine.rank();
    const comm::MessageKey abandoned = key(1);
    const comm::MessageKey renewed{comm::MessageKind::point_to_point, comm::epoch_group_id(abandoned.group, 1), 0, 1};
    compute::Tensor stale = compute::Tensor::zeros({4}, compute::DType::f32);
    compute::Tensor fresh = compute::Tensor::zeros({4}, compute::DType::f32);
    if (engine.rank() == 0) {
      // A receive nobody sends yet, and a large send nobody receives: both given up.
      mailbox.recv(engine, peer, abandoned, stale);
      mailbox.send(engine, peer, key(2), filled(1 << 20, 1.0f));
      mailbox.abandon_transfers();
      mailbox.drain();
    }
    // Both ranks are past the abandoning now; rank 1's late message of the abandoned key comes
    // first, then the one under the renewed key.
    if (Status s = world.barrier(); !s) return s;
    if (engine.rank() == 1) {
      mailbox.send(engine, peer, abandoned, filled(4, 100.0f));
      mailbox.send(engine, peer, renewed, filled(4, 200.0f));
      if (Status s = mailbox.wait_all(); !s) return s;
    } else {
      if (Status s = mailbox.wait(mailbox.recv(engine, peer, renewed, fresh)); !s) return s;
      if (fresh.data_as<float>()[0] != 200.0f)
        return Error{"the renewed receive got " + std::to_string(fresh.data_as<float>()[0])};
      if (stale.data_as<float>()[0] != 0.0f) return Error{"the abandoned receive took a late message"};
    }
    return world.barrier();
  });
}

TEST_CASE("take_orders returns after its limit when nothing came and throws on a stop request", "[actors]") {
  TroupeConfig cfg;
  caf::actor_system system{cfg};
  caf::scoped_actor self{system};
  MailboxComm mailbox(self.ptr());
  const auto start = std::chrono::steady_clock::now();
  mailbox.take_orders(std::chrono::milliseconds(50));
  CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(50));
  self->send(self, stop_atom_v, stop_msg{1, "node 2 was lost"});
  CHECK_THROWS_WITH(mailbox.take_orders(std::chrono::seconds(10)), "node 2 was lost");
}

TEST_CASE("a recovery order whose failed rank completed the step in flight lets the step's transfers finish and is "
          "taken once the worker holds that step; one that did not ends the wait at once",
          "[actors]") {
  on_two_ranks([](comm::Engine& engine, MailboxComm& mailbox, comm::Communicator& world) -> Status {
    const int peer = 1 - engine.rank();
    if (engine.rank() == 1) {
      if (Status s = world.barrier(); !s) return s;
      mailbox.send(engine, peer, key(1), filled(4, 50.0f));
      if (Status s = mailbox.wait_all(); !s) return s;
      return world.barrier();
    }
    caf::blocking_actor* self = mailbox.worker();
    mailbox.holds_steps(3);
    // Rank 1 "failed" after completing step 4, so its message of step 4 is on its way: the order
    // reaches the mailbox before the message and still does not end the wait for it.
    self->send(self, recover_atom_v, recover_msg{1, {1}, "rank 1 failed", {}, 4});
    compute::Tensor in = compute::Tensor::zeros({4}, compute::DType::f32);
    const auto received = mailbox.recv(engine, peer, key(1), in);
    if (Status s = world.barrier(); !s) return s;
    try {
      if (Status s = mailbox.wait(received); !s) return s;
      mailbox.take_waiting_orders();
    } catch (const RecoveryOrdered&) {
      return Error{"the order ended the wait of a step the failed rank had completed"};
    }
    if (in.data_as<float>()[3] != 53.0f) return Error{"the step's message has the wrong contents"};
    mailbox.holds_steps(4);
    try {
      mailbox.take_waiting_orders();
      return Error{"the order was not taken once the worker held step 4"};
    } catch (const RecoveryOrdered& taken) {
      if (taken.order().failed_steps_done != 4) return Error{"another order was taken"};
    }
    // The failed rank had not completed the step this worker is in (or nobody knows): at once.
    for (const std::int64_t failed_steps_done : {std::int64_t{4}, std::int64_t{-1}}) {
      self->send(self, recover_atom_v, recover_msg{2, {1}, "rank 1 failed", {}, failed_steps_done});
      try {
        mailbox.take_orders(std::chrono::seconds(10));
        return Error{"an order of a failed rank at step " + std::to_string(failed_steps_done) + " was not taken"};
      } catch (const RecoveryOrdered&) {
      }
    }
    return world.barrier();
  });
}
