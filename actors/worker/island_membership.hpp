#pragma once
// DiLoCo's outer group of one rank as islands are lost and rejoin while the job runs
// (docs/diloco.md, "Islands lost and rejoining"; the job's side is
// supervision/island_coordinator.hpp). The job's islands_msg orders reach the rank in any wait of
// its mailbox and are acted on here, at the outer sums and after the syncs:
//
//              islands_msg{E, present P}: the outer group renewed over P's ranks (id epoch E);
//   every      the sync in flight settled (below): taken from an island of P that applied it,
//   island     or posted again over P
//   present ──────────────────────────────────────────────────────────────────────────► left out
//      ▲ ◄────────────────────────────────────────────────────────────────────────────  │
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
// A sync in flight when an island was lost may land with the lost island's part at some places and
// fail (or be given up) at others, within an island and across the islands present. Two steps set
// that right:
//   1. the island's ranks agree over the island's own groups (agree_over) on how many islands each
//      sum held; where all hold the same count they apply it at once;
//   2. the renewal that leaves islands out is *settled* through the job: each rank present tells
//      it the outer sums it applied (islands_applied_msg) at its first point where none of its sums
//      waits for its island's agreement; once all did, the job sends every rank the table of them.
//      At each place the first island present that applied the most is the source: it sends the
//      sums it applied last to the ranks at its place that did not, which are waiting after their
//      island's agreement failed and take them as landed; a sync that no island present applied is
//      taken again over the islands present.
// A rank waits on another island's ranks only for the table and, behind, for its source's sums; a
// source reports after applying and sends when it takes the table, at any of its waits or between
// its steps (poll), and waits only for those sends, which ranks waiting for them take. So no wait
// closes a circle through two islands' agreements. The sums an island applied last are kept (a
// copy) until its next sync lands.

// Under streaming one fragment's sum at most is in flight (each lands before the next one starts:
// train.diloco_overlap below H / F), so a rejoining rank, which takes the outer state after the
// first sync over fewer islands, finds every fragment's last sync in it.
//
// The pseudo-gradient of a sum given up is posted again from a copy kept when it was first posted:
// a ring all-reduce adds into its buffer in place, so an abandoned one may have changed it. Where the job does not
// leave islands out (recovery_path.hpp), a failed sum fails the step, as island_hooks' does.

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
  // The sums this rank took from another island by settling rather than summing (logged; for tests).
  long sums_settled() const { return sums_settled_; }

 private:
  struct Posted {
    OuterSum sum;
    compute::Tensor original;  // the pseudo-gradient as first posted; once applied, the sum (kept_)
    long sequence = 0;         // the rank's sums started before this one
    int islands = 0;           // summed over; 0: failed or given up
    long posted_in = 0;        // renewals_ when last posted
    long failed_in = -1;       // renewals_ when it failed on a lost peer: waits for a renewal past it
    bool adopted = false;      // settled: its sum taken from an island present that applied it
  };
  void start_sum(compute::Tensor pseudo_gradient, long steps_taken);
  // Lands the oldest sum posted; where the job leaves islands out it waits in landed_ for agree().
  int wait_sum();
  // Between steps: takes the job's orders waiting, so that a rank that went on settles (above).
  void poll();
  // Once for each fragment of the model that lands: the island's ranks agree on the islands their
  // sums of it (landed_, none where this rank holds none of it) hold; where they differ, each takes
  // the job's order that leaves islands out and sums them again over the islands present. The
  // islands agreed on.
  int agree();
  // Waits until `posted` landed over the group it was last posted to or failed (islands 0); an
  // islands order meanwhile is taken (a renewal gives it up).
  void land(Posted& posted);
  // Whether agree() must wait for an order before taking a sum again: none left islands out yet, or
  // a sum failed after the last renewal.
  bool order_due() const;
  // The settle (above): this rank's outer sums applied to the job, once after a renewal that left
  // islands out, where none of its sums is in flight or landed whole (report_if_final: before its
  // island's agreement too) or, in agree's failure path, with the sum in flight not applied (report).
  void report_if_final();
  void report();
  // From the settle's table: the outer sums the rank at this place in `island` applied, and the
  // first island present whose rank there applied the most (this place's source).
  std::int64_t applied_at(int island) const;
  int settle_source() const;
  // The job's table taken: where this rank is its place's source, its kept sums to the ranks behind.
  void serve();
  // In agree's failure path: waits for the table; where this rank is behind, takes the source's sums
  // into the sums it did not apply (marked adopted).
  void take_settled();
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
  std::vector<Posted> kept_;    // the sums applied last, each in its `original` (settle)
  caf::actor job_;              // the job that left islands out: the settle's reports go to it
  int settle_epoch_ = -1;       // the renewal being settled, or the last one
  bool report_due_ = false;     // ... whose report is not sent yet
  std::optional<islands_msg> settle_table_;  // ... whose table came
  long renewals_ = 0;                        // of the outer group, each abandoning every sum in flight
  long sums_started_ = 0;                    // pseudo-gradients taken, each counted once however often posted
  long sums_applied_ = 0;                    // of them, applied (in order)
  long sums_settled_ = 0;                    // of them, taken from another island (settle)
  bool rejoin_due_ = false;            // a sync over fewer islands landed: hand over at `synced`
  std::optional<islands_msg> rejoin_;  // the rejoin order, until carried out
};

}  // namespace troupe::actors
