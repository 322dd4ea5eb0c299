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
// In place applies today to a worker that threw, and to a node process that was lost or went silent
// when the job can start that node process again (the launcher started every node on this machine:
// a silent one it can also kill), in a job of plain data parallelism on the CPU backend: two or
// more replicas, no pipeline stages, no tensor shards, no ZeRO (each replica then holds the whole
// state, so any survivor can give it), and gradients summed uncompressed (PowerSGD's residuals live
// only in their own rank's memory). An unreachable node's host may be gone with its process, which
// nothing here can kill or start again: the job restarts.

#include <string>

#include "actors/job_options.hpp"
#include "actors/supervision/failure_kind.hpp"

namespace troupe::actors {

// What the choice reads of the job.
struct RecoveryShape {
  std::string mode = "restart";  // fault.recovery: in_place or restart
  int data_parallel = 1;
  int pipeline_stages = 1;
  int tensor_shards = 1;
  int zero = 0;
  std::string backend = "cpu";
  std::string compress = "none";  // comm.compress
  // Whether the job can start a lost node process again: its launcher started every node, on this
  // machine (not --external, no remote host).
  bool replaces_nodes = false;
};

struct RecoveryChoice {
  bool in_place = false;
  std::string why_not;  // when not in place: the reason, for the log line above
};

RecoveryChoice choose_recovery(const RecoveryShape& shape, FailureKind kind);

// The shape of a job of `world_size` ranks as `config` has it; `replaces_nodes` as above.
RecoveryShape recovery_shape(const JobConfig& config, int world_size, bool replaces_nodes);

}  // namespace troupe::actors
