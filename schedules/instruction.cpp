#include "schedules/instruction.hpp"

namespace troupe::schedules {

std::string_view to_string(Op op) {
  switch (op) {
    case Op::recv_act: return "recv_act";
    case Op::forward: return "forward";
    case Op::send_act: return "send_act";
    case Op::recv_grad: return "recv_grad";
    case Op::backward: return "backward";
    case Op::send_grad: return "send_grad";
    case Op::reduce_grads: return "reduce_grads";
    case Op::optimizer_step: return "optimizer_step";
    case Op::backward_input: return "backward_input";
    case Op::backward_weights: return "backward_weights";
  }
  return "unknown op";
}

std::string to_string(const Instruction& instruction) {
  std::string out(to_string(instruction.op));
  if (instruction.op == Op::reduce_grads || instruction.op == Op::optimizer_step) return out;
  out += " mb " + std::to_string(instruction.microbatch) + " chunk " + std::to_string(instruction.chunk);
  if (is_send(instruction.op)) out += " -> stage " + std::to_string(instruction.peer);
  if (is_recv(instruction.op)) out += " <- stage " + std::to_string(instruction.peer);
  return out;
}

}  // namespace troupe::schedules
