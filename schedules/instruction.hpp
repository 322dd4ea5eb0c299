#pragma once
// One step of a pipeline stage's instruction stream. A stream is plain data: the stage actor
// executes it in order and the checker and simulator read it; nobody else decides what a
// stage does next.
//
// Every forward, backward and transfer names its micro-batch and its chunk: the index of the
// model chunk on this stage (0..v-1; always 0 without interleaving). A send or recv also
// names the stage at the other end. Sends and recvs are separate instructions, so the order
// in which a stage posts them is part of the schedule and the checker can prove it safe.

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::schedules {

enum class Op : std::uint8_t {
  recv_act,        // activations of (microbatch, chunk)'s input arrive from the previous virtual stage
  forward,         // forward of (microbatch, chunk); its activations stay stashed until backward
  send_act,        // forward's output goes to the next virtual stage
  recv_grad,       // the gradient of forward's output arrives from the next virtual stage
  backward,        // backward of (microbatch, chunk); frees its stashed activations
  send_grad,       // the gradient of forward's input goes to the previous virtual stage
  reduce_grads,    // data-parallel gradient reduction and tied-embedding reduction happen here
  optimizer_step,  // the update; always the last instruction of a stream
  // A zero-bubble schedule's backward in two: B, the input gradient (what send_grad sends), and
  // later W, the weight gradients, which frees the stashed activations and what B kept for it.
  backward_input,
  backward_weights,
};

struct Instruction {
  Op op = Op::forward;
  int microbatch = 0;
  int chunk = 0;
  int peer = -1;  // the stage at the other end of a send or recv; -1 for every other op

  bool operator==(const Instruction&) const = default;
};

inline bool is_send(Op op) { return op == Op::send_act || op == Op::send_grad; }
inline bool is_recv(Op op) { return op == Op::recv_act || op == Op::recv_grad; }
inline bool is_transfer(Op op) { return is_send(op) || is_recv(op); }
inline bool is_compute(Op op) {
  return op == Op::forward || op == Op::backward || op == Op::backward_input || op == Op::backward_weights;
}
// An op that computes the gradient send_grad sends (and so waits for recv_grad).
inline bool computes_input_grad(Op op) { return op == Op::backward || op == Op::backward_input; }

std::string_view to_string(Op op);

// "forward mb 3 chunk 0", "send_act mb 3 chunk 1 -> stage 2", "recv_grad mb 0 chunk 0 <- stage 1",
// "reduce_grads".
std::string to_string(const Instruction& instruction);

}  // namespace troupe::schedules
