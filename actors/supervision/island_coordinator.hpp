#pragma once
// The job supervisor's side of DiLoCo's islands lost and rejoining (docs/diloco.md, "Islands lost
// and rejoining"; a rank's side is worker/island_membership.hpp). It runs as a recovery of its own
// goal (rejoin_island) in the recovering phase of recovery_coordinator.hpp, which answers joins,
// exits, failures and the timer as for any recovery:
//
//   running ── a node process lost, silent or unreachable, its ranks' islands not all of them
//      ▲       (recovery_path.hpp's choose_island_left_out): islands_msg{E, present} to every node
//      │       of the present islands; every node of the lost islands started again (a live one
//      │       killed first); timer armed ─► recovering
//      │
//      │   every present rank's islands_applied_msg (the outer sums it applied): islands_msg{E,
//      │   present, the table of them} to every node of the present islands (the settle)
//      │
//      │   every new process joined: start_msg with recover_msg{E + 1, islands_kept} to each, and
//      │   islands_msg{E + 1, every island, rejoining, their addresses} to every other node
//      │
//      └── every rejoining rank's recover_done_msg (the outer state taken after step s): one line,
//          state_moved and training_resumed; running on
//
//   Another failure meanwhile, a new process exiting before it joined, a rank's error or the timer
//   (fault.rescue_timeout: the survivors' next sync and the transfer must come within it): the job
//   restarts every node, as for any recovery that cannot complete.

#include <string>
#include <vector>

#include "actors/supervision/job_supervisor_state.hpp"

namespace troupe::actors::supervision {

// running: `lost_nodes` were lost (or went silent or unreachable), and choose_recovery leaves
// islands out: their ranks' islands, whose other nodes' processes are started again with theirs.
// Returns false where it cannot (choose_island_left_out's refusals, every island lost, no place for
// the new processes), the restart's line logged.
bool leave_islands_out(job_actor* self, const std::vector<int>& lost_nodes, FailureKind kind,
                       const std::string& reason);

// Every new process joined and got its start: the present islands' ranks learn whom to hand the
// outer state to after their next sync.
void rejoin_islands(job_actor* self);

// A present rank's outer sums applied after the left-out order; once every present rank reported,
// the table of them to every node of the present islands.
void on_islands_applied(job_actor* self, const islands_applied_msg& report);

// A rejoining rank took the outer state (or failed to); once all did, the recovery is done.
void on_island_rejoined(job_actor* self, const recover_done_msg& done);

}  // namespace troupe::actors::supervision
