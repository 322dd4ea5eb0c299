#include "schedules/checker.hpp"

#include <map>
#include <string>
#include <utility>

namespace troupe::schedules {
namespace {

std::string at(int stage, std::size_t index, const Instruction& instruction) {
  return "stage " + std::to_string(stage) + " instruction " + std::to_string(index) + " (" + to_string(instruction) +
         ")";
}

std::string pair_name(int microbatch, int chunk) {
  return "mb " + std::to_string(microbatch) + " chunk " + std::to_string(chunk);
}

// What a stream has done so far for one (micro-batch, chunk).
struct PairState {
  bool recv_act = false;
  bool forward = false;
  bool send_act = false;
  bool recv_grad = false;
  bool backward = false;
  bool send_grad = false;
  bool backward_input = false;
  bool backward_weights = false;
};

// Rules 1 and 2 for one stream; fills its peaks of stashed activations and of pairs between B and W.
Status check_stream(const Schedule& schedule, int stage, int& peak_stashed, int& peak_weights_owed) {
  const std::vector<Instruction>& stream = schedule.streams[stage];
  const int last_virtual = schedule.virtual_stages() - 1;
  std::vector<PairState> pairs(static_cast<std::size_t>(schedule.microbatches) * schedule.chunks);
  auto index = [&](int microbatch, int chunk) {
    return static_cast<std::size_t>(microbatch) * schedule.chunks + chunk;
  };
  int stashed = 0, weights_owed = 0;
  int handed_down = -1;  // the micro-batch whose gradient a V's bottom handed down and no backward took yet
  peak_stashed = 0;
  peak_weights_owed = 0;
  for (std::size_t i = 0; i < stream.size(); ++i) {
    const Instruction& ins = stream[i];
    const std::string where = at(stage, i, ins);
    const bool closing = ins.op == Op::reduce_grads || ins.op == Op::optimizer_step;
    if (closing) {
      const std::size_t slot = ins.op == Op::reduce_grads ? stream.size() - 2 : stream.size() - 1;
      if (i != slot) return Error{where + ": reduce_grads, optimizer_step must close the stream, once, in that order"};
      continue;
    }
    if (ins.microbatch < 0 || ins.microbatch >= schedule.microbatches) {
      return Error{where + ": micro-batch outside 0.." + std::to_string(schedule.microbatches - 1)};
    }
    if (ins.chunk < 0 || ins.chunk >= schedule.chunks) {
      return Error{where + ": chunk outside 0.." + std::to_string(schedule.chunks - 1)};
    }
    const int here = schedule.virtual_stage(stage, ins.chunk);
    if (is_transfer(ins.op)) {
      const int peer = peer_of(schedule, stage, ins);
      if (peer < 0) {
        return Error{where + ": virtual stage " + std::to_string(here) + " has no neighbour to " +
                     (is_send(ins.op) ? "send this to" : "receive this from")};
      }
      if (ins.peer != peer) return Error{where + ": the other end is stage " + std::to_string(peer)};
    } else if (ins.peer != -1) {
      return Error{where + ": only sends and recvs name a peer"};
    }
    PairState& pair = pairs[index(ins.microbatch, ins.chunk)];
    auto once = [&](bool& flag) -> Status {
      if (flag) return Error{where + ": runs twice"};
      flag = true;
      return {};
    };
    Status status;
    switch (ins.op) {
      case Op::recv_act: status = once(pair.recv_act); break;
      case Op::forward:
        if (here > 0 && local_hop(schedule, here - 1, here)) {
          if (!pairs[index(ins.microbatch, schedule.chunk_of(here - 1))].forward)
            return Error{where + ": forward before the forward of the chunk before it on this stage"};
        } else if (here > 0 && !pair.recv_act) {
          return Error{where + ": forward before its activations arrive (no recv_act)"};
        }
        status = once(pair.forward);
        peak_stashed = std::max(peak_stashed, ++stashed);
        break;
      case Op::send_act:
        if (!pair.forward) return Error{where + ": sends activations its forward has not computed"};
        status = once(pair.send_act);
        break;
      case Op::recv_grad: status = once(pair.recv_grad); break;
      case Op::backward:
      case Op::backward_input:
        if (!pair.forward) return Error{where + ": backward before its forward"};
        if (here < last_virtual && local_hop(schedule, here + 1, here)) {
          const PairState& after = pairs[index(ins.microbatch, schedule.chunk_of(here + 1))];
          if (!after.backward && !after.backward_input)
            return Error{where + ": backward before the backward of the chunk after it on this stage"};
        } else if (here < last_virtual && !pair.recv_grad) {
          return Error{where + ": backward before its gradient arrives (no recv_grad)"};
        }
        if (pair.backward || pair.backward_input) return Error{where + ": runs twice"};
        if (here < last_virtual && local_hop(schedule, here + 1, here) && handed_down == ins.microbatch)
          handed_down = -1;
        if (here > 0 && local_hop(schedule, here, here - 1)) {
          // The runtime hands the gradient down where it lies, which the chunk's next backward overwrites.
          if (handed_down >= 0)
            return Error{where + ": backward before the chunk below it on this stage took micro-batch " +
                         std::to_string(handed_down) + "'s gradient"};
          handed_down = ins.microbatch;
        }
        status = once(ins.op == Op::backward ? pair.backward : pair.backward_input);
        if (ins.op == Op::backward)
          --stashed;
        else
          peak_weights_owed = std::max(peak_weights_owed, ++weights_owed);
        break;
      case Op::backward_weights:
        if (!pair.backward_input) return Error{where + ": weight gradients before their backward_input"};
        status = once(pair.backward_weights);
        --stashed;
        --weights_owed;
        break;
      case Op::send_grad:
        if (!pair.backward && !pair.backward_input)
          return Error{where + ": sends a gradient its backward has not computed"};
        status = once(pair.send_grad);
        break;
      case Op::reduce_grads:
      case Op::optimizer_step: break;
    }
    if (!status) return status;
  }
  const std::string stage_name = "stage " + std::to_string(stage);
  if (stream.size() < 2 || stream[stream.size() - 2].op != Op::reduce_grads || stream.back().op != Op::optimizer_step) {
    return Error{stage_name + ": the stream must end with reduce_grads, optimizer_step"};
  }
  for (int mb = 0; mb < schedule.microbatches; ++mb) {
    for (int c = 0; c < schedule.chunks; ++c) {
      const PairState& pair = pairs[static_cast<std::size_t>(mb) * schedule.chunks + c];
      if (!pair.forward) return Error{stage_name + ": no forward of " + pair_name(mb, c)};
      if (!pair.backward && !pair.backward_input) return Error{stage_name + ": no backward of " + pair_name(mb, c)};
      if (pair.backward_input && !pair.backward_weights)
        return Error{stage_name + ": no backward_weights of " + pair_name(mb, c) + " (its backward_input ran)"};
    }
  }
  return {};
}

struct Position {
  int stage;
  std::size_t index;
};

// Rule 3: every recv has its send. (Every send has its recv already: rule 2 makes the
// receiving forward or backward wait for that recv, and every forward and backward exists.)
Status check_matching(const Schedule& schedule, int& transfers) {
  std::map<Transfer, Position> sends, recvs;
  for (int s = 0; s < schedule.stages; ++s) {
    for (std::size_t i = 0; i < schedule.streams[s].size(); ++i) {
      const Instruction& ins = schedule.streams[s][i];
      if (!is_transfer(ins.op)) continue;
      // Rule 1 passed, so every transfer has its Transfer; rule 2 ruled out duplicates.
      (is_send(ins.op) ? sends : recvs).emplace(*transfer_of(schedule, s, ins), Position{s, i});
    }
  }
  for (const auto& [transfer, recv] : recvs) {
    if (!sends.contains(transfer)) {
      return Error{at(recv.stage, recv.index, schedule.streams[recv.stage][recv.index]) + ": stage " +
                   std::to_string(schedule.stage_of(transfer.from)) + " never sends it"};
    }
  }
  transfers = static_cast<int>(sends.size());
  return {};
}

// Rule 4: the lock-step run with rendezvous sends.
Status check_deadlock(const Schedule& schedule) {
  const int p = schedule.stages;
  std::vector<std::size_t> pc(p, 0);
  auto done = [&](int s) { return pc[s] == schedule.streams[s].size(); };
  bool moved = true;
  while (moved) {
    moved = false;
    for (int s = 0; s < p; ++s) {
      // Local instructions never wait.
      while (!done(s) && !is_transfer(schedule.streams[s][pc[s]].op)) {
        ++pc[s];
        moved = true;
      }
      if (done(s)) continue;
      const Instruction& ins = schedule.streams[s][pc[s]];
      const int q = ins.peer;
      if (done(q)) continue;
      const Instruction& other = schedule.streams[q][pc[q]];
      if (is_transfer(other.op) && is_send(other.op) != is_send(ins.op) && other.peer == s &&
          transfer_of(schedule, q, other) == transfer_of(schedule, s, ins)) {
        ++pc[s];
        ++pc[q];
        moved = true;
      }
    }
  }
  int first_stuck = -1;
  for (int s = 0; s < p && first_stuck < 0; ++s) {
    if (!done(s)) first_stuck = s;
  }
  if (first_stuck < 0) return {};
  // Every stuck stage waits at a transfer whose peer is stuck too (matching passed), so
  // following "waits for" from any stuck stage reaches a cycle; name it.
  std::vector<int> seen_at(p, -1);
  std::vector<int> chain;
  int s = first_stuck;
  while (seen_at[s] < 0) {
    TROUPE_CHECK(!done(s), "a stuck stage waits for a finished one, yet every transfer has both ends");
    seen_at[s] = static_cast<int>(chain.size());
    chain.push_back(s);
    s = schedule.streams[s][pc[s]].peer;
  }
  std::string message = "deadlock under blocking sends:";
  const int cycle_start = seen_at[s];
  for (std::size_t k = cycle_start; k < chain.size(); ++k) {
    const int w = chain[k];
    const Instruction& ins = schedule.streams[w][pc[w]];
    message += (k == static_cast<std::size_t>(cycle_start) ? " " : "; ") + at(w, pc[w], ins) + " waits for stage " +
               std::to_string(ins.peer);
  }
  return Error{message};
}

}  // namespace

Expected<CheckReport> check_schedule(const Schedule& schedule) {
  const int p = schedule.stages;
  if (p < 1 || schedule.microbatches < 1 || schedule.chunks < 1) {
    return Error{"schedule p=" + std::to_string(p) + " m=" + std::to_string(schedule.microbatches) +
                 " v=" + std::to_string(schedule.chunks) + ": p, m and v must be at least 1"};
  }
  if (static_cast<int>(schedule.streams.size()) != p) {
    return Error{"schedule has " + std::to_string(schedule.streams.size()) + " streams for " + std::to_string(p) +
                 " stages"};
  }
  CheckReport report;
  report.peak_stashed.resize(p);
  report.peak_weights_owed.resize(p);
  for (int s = 0; s < p; ++s) {
    if (Status status = check_stream(schedule, s, report.peak_stashed[s], report.peak_weights_owed[s]); !status)
      return status.error();
    report.instructions.push_back(static_cast<int>(schedule.streams[s].size()));
  }
  if (Status status = check_matching(schedule, report.transfers); !status) return status.error();
  if (Status status = check_deadlock(schedule); !status) return status.error();
  return report;
}

}  // namespace troupe::schedules
