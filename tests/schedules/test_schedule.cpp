// The vocabulary: schedule kinds by name, how instructions print, and which stage is at the
// other end of a transfer (virtual stages, interleaved wrap-around from stage p-1 to 0).

#include <catch2/catch.hpp>

#include <string_view>
#include <vector>

#include "schedules/schedule.hpp"

using namespace troupe::schedules;

TEST_CASE("every schedule kind is listed once, by the name pipeline.schedule takes", "[schedule]") {
  std::vector<std::string_view> names;
  for (ScheduleKind kind : schedule_kinds) names.push_back(to_string(kind));
  CHECK(names == std::vector<std::string_view>{"gpipe", "1f1b", "interleaved", "zb-h1", "zb-v"});
}

TEST_CASE("instructions print as op, micro-batch, chunk and peer", "[schedule]") {
  CHECK(to_string(Instruction{Op::forward, 3, 0, -1}) == "forward mb 3 chunk 0");
  CHECK(to_string(Instruction{Op::send_act, 3, 1, 2}) == "send_act mb 3 chunk 1 -> stage 2");
  CHECK(to_string(Instruction{Op::recv_grad, 0, 0, 1}) == "recv_grad mb 0 chunk 0 <- stage 1");
  CHECK(to_string(Instruction{Op::reduce_grads, 0, 0, -1}) == "reduce_grads");
  CHECK(to_string(Instruction{Op::optimizer_step, 0, 0, -1}) == "optimizer_step");
}

TEST_CASE("transfers: activations flow to the next virtual stage, gradients to the previous", "[schedule]") {
  const Schedule plain{ScheduleKind::one_f_one_b, 3, 4, 1, {}};
  CHECK(peer_of(plain, 1, Instruction{Op::send_act, 0, 0, -1}) == 2);
  CHECK(peer_of(plain, 1, Instruction{Op::recv_act, 0, 0, -1}) == 0);
  CHECK(peer_of(plain, 1, Instruction{Op::send_grad, 0, 0, -1}) == 0);
  CHECK(peer_of(plain, 1, Instruction{Op::recv_grad, 0, 0, -1}) == 2);
  // The ends of the pipeline have no neighbour on their outer side.
  CHECK(peer_of(plain, 0, Instruction{Op::recv_act, 0, 0, -1}) == -1);
  CHECK(peer_of(plain, 0, Instruction{Op::send_grad, 0, 0, -1}) == -1);
  CHECK(peer_of(plain, 2, Instruction{Op::send_act, 0, 0, -1}) == -1);
  CHECK(peer_of(plain, 2, Instruction{Op::recv_grad, 0, 0, -1}) == -1);
  CHECK(peer_of(plain, 1, Instruction{Op::forward, 0, 0, -1}) == -1);

  // p = 3, v = 2: stage s holds virtual stages s and 3 + s; stage 2's chunk 0 feeds stage 0's chunk 1.
  const Schedule interleaved{ScheduleKind::interleaved, 3, 3, 2, {}};
  CHECK(interleaved.virtual_stage(2, 0) == 2);
  CHECK(interleaved.virtual_stage(0, 1) == 3);
  CHECK(interleaved.stage_of(4) == 1);
  CHECK(interleaved.chunk_of(4) == 1);
  CHECK(peer_of(interleaved, 2, Instruction{Op::send_act, 5, 0, -1}) == 0);
  CHECK(peer_of(interleaved, 0, Instruction{Op::recv_act, 5, 1, -1}) == 2);
  CHECK(peer_of(interleaved, 0, Instruction{Op::send_grad, 5, 1, -1}) == 2);
  CHECK(peer_of(interleaved, 2, Instruction{Op::send_act, 5, 1, -1}) == -1);  // the last virtual stage
  // Both ends of a message name the same transfer.
  CHECK(transfer_of(interleaved, 2, Instruction{Op::send_act, 5, 0, -1}) ==
        transfer_of(interleaved, 0, Instruction{Op::recv_act, 5, 1, -1}));
  CHECK(transfer_of(interleaved, 0, Instruction{Op::send_grad, 5, 1, -1}) ==
        transfer_of(interleaved, 2, Instruction{Op::recv_grad, 5, 0, -1}));
  CHECK(transfer_of(interleaved, 2, Instruction{Op::send_act, 5, 0, -1}) !=
        transfer_of(interleaved, 2, Instruction{Op::send_act, 4, 0, -1}));
}
