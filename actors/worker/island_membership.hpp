#pragma once
// DiLoCo's outer group of one rank as islands are lost and rejoin while the job runs
// (docs/diloco.md, "Islands lost and rejoining"; the job's side is
// supervision/island_coordinator.hpp). The job's islands_msg orders reach the rank in any wait of
// its mailbox and are acted on here, at the outer sums and after the syncs:
//
//              islands_msg{E, present P}: the outer group renewed over P's ranks (id epoch E);
//   every      a sum in flight given up and its pseudo-gradient posted again over P
//   island ──────────────────────────────────────────────────────────────────────────► left out
//   present ◄─────────────────────────────────────────────────────────────────────────  │
//              after the first sync over P (averaged over |P|): waits for                 │
//              islands_msg{E + 1, P ∪ R, rejoining R, their new addresses}; the rank of   │
//              P's first island at this place sends each rejoining rank at this place     │
//              the steps and the outer state; the outer group renewed over P ∪ R ◄────────┘
//
//   rejoining  a lost island's new rank (recover_msg with islands_kept): its outer group is every
//              island's under epoch E + 1; before its first step it receives the steps, w_sync and
//              the momentum from the rank at its place in the first kept island, takes w_sync as its
//              weights and zero moments, and goes on after those steps.
//
// An island of several ranks sums at every place of it: where a sync was in flight when the other
// island was lost, the sum may land with the lost island's part at one place and fail (and be taken
// again over the islands present) at another. Each sum's ranks therefore agree over the island's
// own groups (agree_over) on how many islands they summed over before they apply it; where they
// differ, each takes the job's order and sums again over the islands present. (Islands of more than
// one rank are left out only among two islands, recovery_path.hpp, so that sum is the rank's own.)
//
// Under streaming one fragment's sum at most is in flight (each lands before the next one starts:
// train.diloco_overlap below H / F), so a rejoining rank, which takes the outer state after the
// first sync over fewer islands, finds every fragment's last sync in it.
//
// The pseudo-gradient of a sum given up is posted again from a copy kept when it was first posted:
// a ring all-reduce adds into its buffer in place, so an abandoned one may have changed it. After a
// renewal that left islands out, the present ranks first check that they post the same sync.
// Where the job does not leave islands out (recovery_path.hpp), a failed sum fails the step, as
// island_hooks' does.

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "actors/messages.hpp"
#include "actors/worker/data_parallel_hooks.hpp"
#include "actors/worker/in_place_recovery.hpp"
#include "actors/worker/mailbox_comm.hpp"
#include "actors/worker/training_loop.hpp"
#include "comm/collectives.hpp"
#include "comm/engine.hpp"
#include "comm/grid.hpp"
#include "compute/train/outer_step.hpp"
#include "monitor/work_progress.hpp"

namespace troupe::actors {

class IslandMembership {
 public:
  // `outer`: the rank's outer group as it starts (a rejoining rank's: under its order's epoch).
  // `leaves_out`: whether the job leaves lost islands out (else a failed sum throws CommFailed).
  // `kill_after_posting`: TROUPE_DRILL_KILL_AT's `:sync` step for this rank's first process, or −1.
  IslandMembership(MailboxComm& mailbox, comm::Engine& engine, monitor::WorkProgress& progress, const comm::Grid& grid,
                   int islands, compute::OuterPrecision precision, std::unique_ptr<comm::Communicator> outer,
                   bool leaves_out, long kill_after_posting = -1);

  // The groups whose product is the rank's island, over which its ranks agree on each sum (above):
  // its data-parallel group, and with tensor shards or stages its tensor and pipeline groups.
  // None where the job does not leave islands out, or the island is this rank alone.
  void agree_over(std::vector<comm::Communicator*> groups);

  // The outer step's hooks over this membership; it must outlive them.
  compute::IslandGroup group();

  // A lost island's new rank, before its first step: the outer state from its donor into `loop`'s
  // held state (outer_sync, outer_momentum; param from outer_sync; zero moments), the loop resumed
  // after the donor's steps; tells the job (recover_done_msg). Throws CommFailed where it fails.
  RecoveryResult rejoin(const recover_msg& order, TrainingLoop& loop);

  comm::Communicator& communicator() { return *outer_; }

 private:
  struct Posted {
    OuterSum sum;
    compute::Tensor original;  // the pseudo-gradient as first posted
    int islands = 0;           // summed over
  };
  void start_sum(compute::Tensor pseudo_gradient, long steps_taken);
  // Lands the oldest sum posted; where the job leaves islands out it waits in landed_ for agree().
  int wait_sum();
  // Once for each fragment of the model that lands: the island's ranks agree on the islands their
  // sums of it (landed_, none where this rank holds none of it) hold; where they differ, each takes
  // the job's order that leaves islands out and sums them again over the islands present. The
  // islands agreed on.
  int agree();
  // Until `posted` landed over the group it was last posted to, posting it again over the islands
  // present where the job left islands out meanwhile.
  void land(Posted& posted);
  // Whether every rank of the island summed over `islands` islands, each consistently over its own
  // sums (`consistent`).
  bool island_agrees(int islands, bool consistent);
  void synced(long steps_taken, const compute::Tensor& last_sync, const compute::Tensor& momentum);
  // Takes the islands orders waiting: a left-out order renews the group now, a rejoin order is kept
  // for the next sync. Whether the group was renewed.
  bool take_orders();
  void renew(int epoch, const std::vector<int>& present);
  // Posts `posted`'s pseudo-gradient over the present group; after a renewal that left islands out,
  // first checks that every present rank is at the same sync (below).
  void post(Posted& posted);
  // Posts `posted`'s pseudo-gradient again from its first copy, over the islands present.
  void repost(Posted& posted);
  // The rank at this rank's place in island `island`.
  int rank_in(int island) const;

  MailboxComm& mailbox_;
  comm::Engine& engine_;
  monitor::WorkProgress& progress_;
  comm::Grid grid_;
  int islands_;
  compute::OuterPrecision precision_;
  std::unique_ptr<comm::Communicator> outer_;
  bool leaves_out_;
  std::vector<comm::Communicator*> island_groups_;  // agree_over's; empty: no agreement
  long kill_after_posting_;
  std::vector<int> present_;  // the islands of outer_, in order
  std::deque<Posted> posted_;
  std::vector<Posted> landed_;  // sums landed, waiting for the island's agreement (agree)
  long renewals_ = 0;      // of the outer group, each abandoning every sum in flight
  long sums_started_ = 0;  // pseudo-gradients taken, each counted once however often posted
  // Islands were left out since the last post: with three or more islands, a sum in flight may have
  // landed on some survivors (the lost rank had sent its part to them) and not on others, which
  // would then post different syncs' pseudo-gradients together. The first operation over the renewed
  // group sums sums_started_ and fails the rank where the survivors differ (the job restarts).
  bool check_agreement_ = false;
  bool rejoin_due_ = false;            // a sync over fewer islands landed: hand over at `synced`
  std::optional<islands_msg> rejoin_;  // the rejoin order, until carried out
};

}  // namespace troupe::actors
