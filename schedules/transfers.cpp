#include "schedules/transfers.hpp"

#include <algorithm>

namespace troupe::schedules {
namespace {

// The order a runtime with non-blocking sends likes best: each recv just before the compute
// that consumes it, each send just after the compute that produced it.
std::vector<Instruction> eager_stream(const Schedule& shape, int stage, const std::vector<Instruction>& computes) {
  std::vector<Instruction> stream;
  for (const Instruction& compute : computes) {
    if (compute.op == Op::backward_weights) {  // W neither receives nor sends
      stream.push_back(compute);
      continue;
    }
    const bool forward = compute.op == Op::forward;
    Instruction recv{forward ? Op::recv_act : Op::recv_grad, compute.microbatch, compute.chunk, -1};
    recv.peer = peer_of(shape, stage, recv);
    if (recv.peer >= 0) stream.push_back(recv);
    stream.push_back(compute);
    Instruction send{forward ? Op::send_act : Op::send_grad, compute.microbatch, compute.chunk, -1};
    send.peer = peer_of(shape, stage, send);
    if (send.peer >= 0) stream.push_back(send);
  }
  return stream;
}

bool meets(const Schedule& shape, int stage, const Instruction& a, int peer, const Instruction& b) {
  return is_transfer(b.op) && is_send(a.op) != is_send(b.op) && a.peer == peer && b.peer == stage &&
         transfer_of(shape, stage, a) == transfer_of(shape, peer, b);
}

}  // namespace

std::vector<std::vector<Instruction>> place_transfers(const Schedule& shape,
                                                      const std::vector<std::vector<Instruction>>& computes) {
  const int p = shape.stages;
  TROUPE_CHECK(static_cast<int>(computes.size()) == p, "one compute order per stage");
  std::vector<std::vector<Instruction>> streams(p);
  for (int s = 0; s < p; ++s) streams[s] = eager_stream(shape, s, computes[s]);

  // Run with blocking sends; every deadlock is broken where it stands and the run goes on.
  std::vector<std::size_t> pc(p, 0);
  auto done = [&](int s) { return pc[s] == streams[s].size(); };
  while (true) {
    bool moved = true;
    while (moved) {
      moved = false;
      for (int s = 0; s < p; ++s) {
        while (!done(s) && !is_transfer(streams[s][pc[s]].op)) {
          ++pc[s];
          moved = true;
        }
        if (done(s)) continue;
        const int q = streams[s][pc[s]].peer;
        if (!done(q) && meets(shape, s, streams[s][pc[s]], q, streams[q][pc[q]])) {
          ++pc[s];
          ++pc[q];
          moved = true;
        }
      }
    }
    int stuck = -1;
    for (int s = 0; s < p && stuck < 0; ++s) {
      if (!done(s)) stuck = s;
    }
    if (stuck < 0) break;
    // Walk "waits for" into the cycle. In it, pick a stage A whose predecessor X is stuck
    // sending to A, and let A receive that message first: the recv moves up to where A
    // stands. Of all such stages, the one whose recv moves the shortest way.
    std::vector<int> seen(p, 0);
    int s = stuck;
    while (!seen[s]) {
      TROUPE_CHECK(!done(s), "a stage waits for a finished peer: compute orders disagree");
      seen[s] = 1;
      s = streams[s][pc[s]].peer;
    }
    int best_stage = -1;
    std::size_t best_at = 0;
    const int cycle_start = s;
    do {
      const int x = s;
      const int a = streams[x][pc[x]].peer;
      const Instruction& sent = streams[x][pc[x]];
      if (is_send(sent.op)) {
        for (std::size_t i = pc[a] + 1; i < streams[a].size(); ++i) {
          if (!meets(shape, a, streams[a][i], x, sent)) continue;
          const std::size_t distance = i - pc[a];
          const std::size_t best_distance = best_stage < 0 ? 0 : best_at - pc[best_stage];
          if (best_stage < 0 || distance < best_distance || (distance == best_distance && a < best_stage)) {
            best_stage = a;
            best_at = i;
          }
          break;
        }
      }
      s = a;
    } while (s != cycle_start);
    TROUPE_CHECK(best_stage >= 0, "deadlock of recvs only: compute orders wait on each other");
    std::vector<Instruction>& stream = streams[best_stage];
    std::rotate(stream.begin() + pc[best_stage], stream.begin() + best_at, stream.begin() + best_at + 1);
  }

  for (std::vector<Instruction>& stream : streams) {
    stream.push_back(Instruction{Op::reduce_grads, 0, 0, -1});
    stream.push_back(Instruction{Op::optimizer_step, 0, 0, -1});
  }
  return streams;
}

}  // namespace troupe::schedules
