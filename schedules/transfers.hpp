#pragma once
// Where a stage's sends and recvs go, given the order of its forwards and backwards.
//
// Two runtimes must run the result. The real one posts sends and recvs without blocking and
// makes a compute wait only for its own input; for it the best place of a send is right
// after the compute that produced it, and where a recv sits hardly matters. A runtime with
// blocking (rendezvous) sends, where a send or recv completes only when the peer stands at
// the matching instruction, deadlocks on that order: in 1F1B's steady state stage s holds
// [send_act i, recv_grad j] while stage s+1 holds [send_grad j, recv_act i], and each waits
// for the other forever; interleaving adds rings (stage p-1 feeds stage 0) where every stage
// waits for the next.
//
// So place_transfers() starts from the eager order (recv just before the compute that
// consumes it, send just after the compute that produced it) and runs all stages with
// blocking sends. Each time the run deadlocks it breaks the cycle where it stands: some
// stage A in the cycle is stuck while its predecessor X is stuck sending to A; A's recv of
// that message moves up to where A stands, so A takes it first. Of the candidates, the recv
// that moves the shortest way wins (then the lowest stage). Sends never move, so the real
// runtime still posts each one as soon as it is computed; a recv that moved up is posted
// earlier, which costs it nothing. The run then goes on from the same point, and ends when
// every stage is through; check_schedule() proves the result independently.

#include <vector>

#include "schedules/schedule.hpp"

namespace troupe::schedules {

// `computes[s]` holds stage s's forwards and backwards in order; returns the full streams,
// each closed by reduce_grads, optimizer_step. The compute orders must be consistent (every
// input produced by an earlier compute of some stage); a violation is a generator bug and
// fails a TROUPE_CHECK.
std::vector<std::vector<Instruction>> place_transfers(const Schedule& shape,
                                                      const std::vector<std::vector<Instruction>>& computes);

}  // namespace troupe::schedules
