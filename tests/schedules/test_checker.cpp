// The checker rejects each kind of unsound stream with an error naming the stage, the
// instruction and what is wrong, and accepts a sound one with its peak memory. Streams here
// are written by hand, so every rule is seen failing.

#include <catch2/catch.hpp>

#include <string>

#include "schedules/checker.hpp"

using namespace troupe::schedules;

namespace {

Instruction fwd(int mb, int chunk = 0) { return {Op::forward, mb, chunk, -1}; }
Instruction bwd(int mb, int chunk = 0) { return {Op::backward, mb, chunk, -1}; }
Instruction send_act(int mb, int peer, int chunk = 0) { return {Op::send_act, mb, chunk, peer}; }
Instruction recv_act(int mb, int peer, int chunk = 0) { return {Op::recv_act, mb, chunk, peer}; }
Instruction send_grad(int mb, int peer, int chunk = 0) { return {Op::send_grad, mb, chunk, peer}; }
Instruction recv_grad(int mb, int peer, int chunk = 0) { return {Op::recv_grad, mb, chunk, peer}; }
const Instruction reduce{Op::reduce_grads, 0, 0, -1};
const Instruction step{Op::optimizer_step, 0, 0, -1};

// Two stages, one micro-batch, written out; tests break one thing at a time.
Schedule two_stages(std::vector<Instruction> stage0, std::vector<Instruction> stage1, int microbatches = 1) {
  return Schedule{ScheduleKind::one_f_one_b, 2, microbatches, 1, {std::move(stage0), std::move(stage1)}};
}

// A sound pair of streams for p = 2, m = 1, to break one thing at a time.
const std::vector<Instruction> stage0_ok{fwd(0), send_act(0, 1), recv_grad(0, 1), bwd(0), reduce, step};
const std::vector<Instruction> stage1_ok{recv_act(0, 0), fwd(0), bwd(0), send_grad(0, 0), reduce, step};

Schedule one_stage(std::vector<Instruction> stream) {
  return Schedule{ScheduleKind::gpipe, 1, 1, 1, {std::move(stream)}};
}

std::string error_of(const Schedule& schedule) {
  auto report = check_schedule(schedule);
  return report.ok() ? "ok" : report.error().message;
}

}  // namespace

TEST_CASE("a sound hand-written pipeline passes, with its peak and counts", "[checker]") {
  const Schedule good = two_stages(stage0_ok, stage1_ok);
  auto report = check_schedule(good);
  REQUIRE(report.ok());
  CHECK(report.value().peak_stashed == std::vector<int>{1, 1});
  CHECK(report.value().instructions == std::vector<int>{6, 6});
  CHECK(report.value().transfers == 2);
}

TEST_CASE("shape: stream count, ranges, neighbours and peers", "[checker]") {
  CHECK(error_of(Schedule{ScheduleKind::gpipe, 2, 1, 1, {{}}}) == "schedule has 1 streams for 2 stages");
  CHECK(error_of(Schedule{ScheduleKind::gpipe, 0, 1, 1, {}}) == "schedule p=0 m=1 v=1: p, m and v must be at least 1");
  CHECK(error_of(two_stages({fwd(1), reduce, step}, {reduce, step})) ==
        "stage 0 instruction 0 (forward mb 1 chunk 0): micro-batch outside 0..0");
  CHECK(error_of(two_stages({fwd(0, 1), reduce, step}, {reduce, step})) ==
        "stage 0 instruction 0 (forward mb 0 chunk 1): chunk outside 0..0");
  CHECK(error_of(two_stages({recv_act(0, 1), reduce, step}, {reduce, step})) ==
        "stage 0 instruction 0 (recv_act mb 0 chunk 0 <- stage 1): virtual stage 0 has no neighbour to receive this "
        "from");
  CHECK(error_of(two_stages(stage0_ok, {recv_act(0, 1), fwd(0), bwd(0), send_grad(0, 0), reduce, step})) ==
        "stage 1 instruction 0 (recv_act mb 0 chunk 0 <- stage 1): the other end is stage 0");
  CHECK(error_of(
            two_stages(stage0_ok, {recv_act(0, 0), fwd(0), send_act(0, 0), bwd(0), send_grad(0, 0), reduce, step})) ==
        "stage 1 instruction 2 (send_act mb 0 chunk 0 -> stage 0): virtual stage 1 has no neighbour to send this to");
  CHECK(error_of(two_stages({Instruction{Op::forward, 0, 0, 1}, reduce, step}, {reduce, step})) ==
        "stage 0 instruction 0 (forward mb 0 chunk 0): only sends and recvs name a peer");
}

TEST_CASE("order: forward before its recv_act, backward before forward or recv_grad, sends before compute",
          "[checker]") {
  CHECK(error_of(two_stages({fwd(0), send_act(0, 1), recv_grad(0, 1), bwd(0), reduce, step},
                            {fwd(0), recv_act(0, 0), bwd(0), send_grad(0, 0), reduce, step})) ==
        "stage 1 instruction 0 (forward mb 0 chunk 0): forward before its activations arrive (no recv_act)");
  CHECK(error_of(two_stages({bwd(0), fwd(0), reduce, step}, {reduce, step})) ==
        "stage 0 instruction 0 (backward mb 0 chunk 0): backward before its forward");
  CHECK(error_of(two_stages({fwd(0), send_act(0, 1), bwd(0), recv_grad(0, 1), reduce, step},
                            {recv_act(0, 0), fwd(0), bwd(0), send_grad(0, 0), reduce, step})) ==
        "stage 0 instruction 2 (backward mb 0 chunk 0): backward before its gradient arrives (no recv_grad)");
  CHECK(error_of(two_stages({send_act(0, 1), fwd(0), reduce, step}, {reduce, step})) ==
        "stage 0 instruction 0 (send_act mb 0 chunk 0 -> stage 1): sends activations its forward has not computed");
  CHECK(error_of(two_stages(stage0_ok, {recv_act(0, 0), fwd(0), send_grad(0, 0), bwd(0), reduce, step})) ==
        "stage 1 instruction 2 (send_grad mb 0 chunk 0 -> stage 0): sends a gradient its backward has not computed");
  CHECK(error_of(two_stages({fwd(0), fwd(0), reduce, step}, {reduce, step})) ==
        "stage 0 instruction 1 (forward mb 0 chunk 0): runs twice");
}

TEST_CASE("every (micro-batch, chunk) forwarded and backwarded, streams closed by reduce_grads and optimizer_step",
          "[checker]") {
  CHECK(error_of(two_stages({fwd(0), send_act(0, 1), recv_grad(0, 1), bwd(0), reduce, step},
                            {recv_act(0, 0), fwd(0), bwd(0), send_grad(0, 0), reduce, step}, 2)) ==
        "stage 0: no forward of mb 1 chunk 0");
  CHECK(error_of(one_stage({fwd(0), reduce, step})) == "stage 0: no backward of mb 0 chunk 0");
  CHECK(
      error_of(one_stage({fwd(0), bwd(0), reduce})) ==
      "stage 0 instruction 2 (reduce_grads): reduce_grads, optimizer_step must close the stream, once, in that order");
  CHECK(
      error_of(one_stage({reduce, fwd(0), bwd(0), step})) ==
      "stage 0 instruction 0 (reduce_grads): reduce_grads, optimizer_step must close the stream, once, in that order");
  CHECK(error_of(one_stage({fwd(0), bwd(0), step, reduce})) ==
        "stage 0 instruction 2 (optimizer_step): reduce_grads, optimizer_step must close the stream, once, in that "
        "order");
  CHECK(error_of(one_stage({fwd(0), bwd(0)})) == "stage 0: the stream must end with reduce_grads, optimizer_step");
}

TEST_CASE("matching: a recv whose send is missing, and a send nobody receives", "[checker]") {
  CHECK(error_of(two_stages({fwd(0), recv_grad(0, 1), bwd(0), reduce, step},
                            {recv_act(0, 0), fwd(0), bwd(0), send_grad(0, 0), reduce, step})) ==
        "stage 1 instruction 0 (recv_act mb 0 chunk 0 <- stage 0): stage 0 never sends it");
  // A send nobody receives leaves its receiver computing without the input, and is caught there.
  CHECK(error_of(two_stages({fwd(0), send_act(0, 1), recv_grad(0, 1), bwd(0), reduce, step},
                            {fwd(0), bwd(0), send_grad(0, 0), reduce, step})) ==
        "stage 1 instruction 0 (forward mb 0 chunk 0): forward before its activations arrive (no recv_act)");
}

TEST_CASE("deadlock: two stages that both send first wait for each other forever", "[checker]") {
  // 1F1B's steady state written the textbook way: stage 0 sends mb 1's activations before
  // taking mb 0's gradient, stage 1 sends that gradient before taking those activations.
  const Schedule crossing = two_stages(
      {fwd(0), send_act(0, 1), fwd(1), send_act(1, 1), recv_grad(0, 1), bwd(0), recv_grad(1, 1), bwd(1), reduce, step},
      {recv_act(0, 0), fwd(0), bwd(0), send_grad(0, 0), recv_act(1, 0), fwd(1), bwd(1), send_grad(1, 0), reduce, step},
      2);
  CHECK(error_of(crossing) ==
        "deadlock under blocking sends: stage 0 instruction 3 (send_act mb 1 chunk 0 -> stage 1) waits for stage 1; "
        "stage 1 instruction 3 (send_grad mb 0 chunk 0 -> stage 0) waits for stage 0");
  // Stage 0 taking the gradient first breaks the cycle.
  Schedule fixed = crossing;
  std::swap(fixed.streams[0][3], fixed.streams[0][4]);
  CHECK(error_of(fixed) == "ok");
}

TEST_CASE("deadlock: a ring of three stages each waiting for the one before", "[checker]") {
  // Interleaved, p = 3, v = 2, m = 1: stage 2's chunk 0 feeds stage 0's chunk 1. Stage 0 takes
  // its chunk-1 input before passing its chunk-0 output on, so the ring waits on itself.
  Schedule ring{ScheduleKind::interleaved, 3, 1, 2, {}};
  ring.streams = {
      {fwd(0, 0), recv_act(0, 2, 1), send_act(0, 1, 0), fwd(0, 1), send_act(0, 1, 1), recv_grad(0, 1, 1), bwd(0, 1),
       send_grad(0, 2, 1), recv_grad(0, 1, 0), bwd(0, 0), reduce, step},
      {recv_act(0, 0, 0), fwd(0, 0), send_act(0, 2, 0), recv_act(0, 0, 1), fwd(0, 1), send_act(0, 2, 1),
       recv_grad(0, 2, 1), bwd(0, 1), send_grad(0, 0, 1), recv_grad(0, 2, 0), bwd(0, 0), send_grad(0, 0, 0), reduce,
       step},
      {recv_act(0, 1, 0), fwd(0, 0), send_act(0, 0, 0), recv_act(0, 1, 1), fwd(0, 1), bwd(0, 1), send_grad(0, 1, 1),
       recv_grad(0, 0, 0), bwd(0, 0), send_grad(0, 1, 0), reduce, step},
  };
  CHECK(error_of(ring) ==
        "deadlock under blocking sends: stage 0 instruction 1 (recv_act mb 0 chunk 1 <- stage 2) waits for stage 2; "
        "stage 2 instruction 0 (recv_act mb 0 chunk 0 <- stage 1) waits for stage 1; stage 1 instruction 0 (recv_act "
        "mb 0 chunk 0 <- stage 0) waits for stage 0");
  // Passing chunk 0 on first mends it.
  std::swap(ring.streams[0][1], ring.streams[0][2]);
  CHECK(error_of(ring) == "ok");
}
