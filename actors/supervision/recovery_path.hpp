#pragma once
// Which way the job recovers from a failure while it runs (docs/drills.md, "In-place recovery"),
// as a pure function the job supervisor asks: in place (only the failed worker is respawned, in its
// own process, and takes its state from a surviving replica over the data plane; or only the lost
// node process is started again, the survivors keeping theirs) or restart (every node process
// restarts from the survivors' rescue snapshot or the newest checkpoint). In place is
// the default where it applies; everywhere else the job restarts and logs why, in one line:
//
//   recovery: restarting every node: <why_not>
//
// In place applies to a worker that threw, and to a node process that was lost, went silent or
// became unreachable when the job can start that node process again (its launcher started every
// node, here or through the launcher template: a silent one it can also kill; an unreachable one's
// replacement goes to a spare host-file line, which the launcher may lack), in a job of two or
// more data-parallel replicas on the CPU backend, with or without pipeline stages and tensor
// shards: every rank's state is its (pipeline stage, tensor shard)'s part of the model, and the
// rank of the same stage and shard in another replica holds the same part. Gradient sums in bf16
// keep no state of their own, so they change nothing here.
//
// Where no replica holds the failed rank's state the job still recovers in place when it writes
// checkpoints (checkpoint.dir): by rollback. That is one data-parallel replica (with or without
// pipeline stages and tensor shards), ZeRO (each replica holds only its shard of the optimizer
// state, under ZeRO-3 of the parameters too) and PowerSGD's sums (each rank's residual lives only
// in its own memory). Only what died is respawned as above, and every rank, the survivors in their
// own processes included, forgets the step it was in, loads its own shards of the newest checkpoint
// every rank can read and goes on from there; the steps since that checkpoint are trained again.
// The same rollback answers a plan that finds no rank holding the newest steps of some (stage,
// shard). DiLoCo's islands (more than one) hold weights of their own between syncs: no replica
// holds a lost island's, so the job leaves that island out instead (choose_island_left_out below,
// island_coordinator.hpp), or restarts every node from the newest checkpoint where that does not apply.
//
// plan_recovery() is the plan once every rank has said how many steps it holds: every rank goes on
// after the most steps any rank holds, each rank holding fewer (a replacement, and a survivor an
// order interrupted in the last wait of a step its peers completed) receiving them from a rank of
// its own stage and shard.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "actors/failure_kind.hpp"
#include "actors/recovery_shape.hpp"

namespace troupe::actors {

struct RecoveryChoice {
  bool in_place = false;
  // In place by rollback (above): no replica holds the failed rank's state, every rank loads the
  // newest checkpoint.
  bool rollback = false;
  std::string why_not;  // when not in place: the reason, for the log line above
  // In place for DiLoCo's islands: the lost island is left out and rejoins (choose_island_left_out).
  bool island_left_out = false;
};

RecoveryChoice choose_recovery(const RecoveryShape& shape, FailureKind kind);

// Whether every rank's whole state (parameters, AdamW moments, the gradient sums' own state) is
// also held by the rank of the same pipeline stage and tensor shard in another data-parallel
// replica; where it is not, why — the one rule behind in-place recovery's rollback, the rescue
// snapshot and the grow: a single replica, ZeRO's shards (of the moments; under ZeRO-3 of the
// parameters too), PowerSGD's per-rank residual.
struct ReplicaState {
  bool held = true;
  std::string why_not;
};
ReplicaState replica_state(const RecoveryShape& shape);

// Whether an attempt's survivors may be asked for a rescue snapshot (their memory of the last
// completed step, written as a checkpoint): with checkpoint.dir, on the CPU backend, where a
// replica holds every rank's state. `why_not` is the reason when not.
struct RescueChoice {
  bool allowed = false;
  std::string why_not;
};
RescueChoice rescue_choice(const RecoveryShape& shape);

// Whether nodes that come back after a shrink (the shell's rejoin, a new spare line) join the
// running job in place: the job's launcher starts their processes, the survivors keep theirs and
// give each new rank its state over the data plane, and every replica splits the global batch anew.
// That needs every rank to hold the whole state of plain data parallelism (no pipeline stages,
// tensor shards, ZeRO or compression residuals) on the CPU backend, with fault.recovery in_place;
// otherwise the job grows by restarting every node from a checkpoint, and why_not says why.
RecoveryChoice choose_grow(const RecoveryShape& shape);

// DiLoCo's islands left out (docs/diloco.md, "Islands lost and rejoining"): where a node process
// was lost, silent or unreachable in a job whose failure choose_recovery answers in place, the
// islands of the lost ranks (`lost_ranks`), if not all of them, are left out: the other islands go
// on without them and every node process holding a rank of theirs is started again (a live one
// killed first), to rejoin at the next outer sync with the outer state of a present island. An
// island's ranks agree on each sync over its groups, and the ranks present settle a sync in flight
// among themselves (worker/island_membership.hpp), so islands of one rank or of several (replicas,
// tensor or context shards, pipeline stages) are left out among any number of islands. Streaming
// and ZeRO are allowed: the rejoin starts the new
// ranks' moments, or their shards of them, afresh. `lost`: the islands lost, in order; empty with
// `why_not` where the job restarts every node instead. With no ranks, whether the shape allows it
// at all.
struct IslandChoice {
  std::vector<int> lost;
  std::string why_not;
};
IslandChoice choose_island_left_out(const RecoveryShape& shape, const std::vector<int>& lost_ranks);

// Who gives whom its state: `donors[i]` sends to `receivers[i]`; every rank goes on after `steps`.
// When some (stage, shard) has no rank holding `steps`, no plan: `why_not` says which, and the job
// rolls back (plan_rollback) or restarts every node instead. A rollback plan has no donors: every
// rank loads its own shards of checkpoint `steps`.
struct RecoveryPlan {
  std::int64_t steps = -1;
  std::vector<int> donors;
  std::vector<int> receivers;
  bool rollback = false;
  std::string why_not;
};

// `steps_done`: every rank's steps held, by rank (−1: a replacement, holding nothing). A (stage,
// shard, place in the expert group)'s receivers are spread evenly, in rank order, over its ranks
// holding the most steps (under expert shards only the ranks at one place hold its experts): one
// receiver takes the lowest of them; a lost node's receivers take as many donors as there are, each
// its own while the holders outnumber them.
RecoveryPlan plan_recovery(const RecoveryShape& shape, const std::map<int, std::int64_t>& steps_done);

// `checkpoint_steps`: the newest complete checkpoint each rank can read, by rank (−1: none). Every
// rank goes back to the oldest of them, which every rank can read; no plan when a rank has none.
RecoveryPlan plan_rollback(const std::map<int, std::int64_t>& checkpoint_steps);

// Why `rank`'s state is in no replica, for the log: what ZeRO or PowerSGD keeps in one rank alone
// (replica_state), or with one replica "no replica holds pipeline stage 1's state".
std::string no_replica_reason(const RecoveryShape& shape, int rank);

}  // namespace troupe::actors
