#include "schedules/schedule.hpp"

namespace troupe::schedules {

std::string_view to_string(ScheduleKind kind) {
  switch (kind) {
    case ScheduleKind::gpipe: return "gpipe";
    case ScheduleKind::one_f_one_b: return "1f1b";
    case ScheduleKind::interleaved: return "interleaved";
    case ScheduleKind::zb_h1: return "zb-h1";
    case ScheduleKind::zb_v: return "zb-v";
  }
  return "unknown schedule";
}

std::optional<Transfer> transfer_of(const Schedule& schedule, int stage, const Instruction& instruction) {
  if (!is_transfer(instruction.op)) return std::nullopt;
  const int here = schedule.virtual_stage(stage, instruction.chunk);
  const bool gradient = instruction.op == Op::send_grad || instruction.op == Op::recv_grad;
  // A send leaves from here; a recv comes from the neighbour the message flows away from.
  int from = here;
  if (instruction.op == Op::recv_act) from = here - 1;
  if (instruction.op == Op::recv_grad) from = here + 1;
  const Transfer transfer{gradient, instruction.microbatch, from};
  const int last = schedule.virtual_stages() - 1;
  if (transfer.from < 0 || transfer.from > last || transfer.to() < 0 || transfer.to() > last) return std::nullopt;
  if (local_hop(schedule, transfer.from, transfer.to())) return std::nullopt;
  return transfer;
}

int peer_of(const Schedule& schedule, int stage, const Instruction& instruction) {
  const std::optional<Transfer> transfer = transfer_of(schedule, stage, instruction);
  if (!transfer) return -1;
  return schedule.stage_of(is_send(instruction.op) ? transfer->to() : transfer->from);
}

std::string to_string(const Schedule& schedule) {
  std::string out = std::string(to_string(schedule.kind)) + " p=" + std::to_string(schedule.stages) +
                    " m=" + std::to_string(schedule.microbatches) + " v=" + std::to_string(schedule.chunks) + "\n";
  for (std::size_t s = 0; s < schedule.streams.size(); ++s) {
    out += "stage " + std::to_string(s) + ":\n";
    for (std::size_t i = 0; i < schedule.streams[s].size(); ++i) {
      const std::string index = std::to_string(i);
      out += std::string(index.size() < 4 ? 4 - index.size() : 0, ' ') + index + "  " +
             to_string(schedule.streams[s][i]) + "\n";
    }
  }
  return out;
}

}  // namespace troupe::schedules
