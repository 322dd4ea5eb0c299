#pragma once
// Orders from the job's shell to one worker, obeyed at its step boundaries: pause there until
// resumed, save a checkpoint there, fail there (the kill-worker drill), or stop while held. A
// rescue ordered by the job (a peer was lost) ends a wait at a boundary too: a paused worker
// holds exactly the state the rescue snapshot wants, and otherwise would sit out the job's wait.
//
// Ranks of a job run in lockstep (every step ends in collectives that need every rank), so they
// can agree on a boundary in two phases without stopping training for longer than a round trip:
// hold() stops the worker at its next boundary and says which one that is; the coordinator
// takes the largest answer over all ranks (no rank can be more than one boundary ahead of
// another) and act()s on it, which lets every held worker run on to that boundary and obey there.
// A boundary is the number of steps done before the next step begins.
//
// The worker thread calls at_boundary() before every step and finished() after its last; the
// node's control side calls the rest from another thread. Every call takes the lock.

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>

#include "monitor/work_progress.hpp"

namespace troupe::monitor {

// checkpoint_and_hold: save there, then stay held until act() (the shell's rejoin: the job grows
// at that boundary, not at whichever boundary its order happens to reach).
enum class BoundaryAction { none, checkpoint, pause, checkpoint_and_hold };

// What at_boundary() tells the worker to do before its next step.
struct BoundaryOrder {
  bool checkpoint = false;  // save a checkpoint of the steps done, then ask again
  bool fail = false;        // throw, as a bug would
  bool stop = false;        // the node is stopping: end the run now
  bool rescue = false;      // the job wants the state of the steps done (its order is in the mailbox)
};

class StepControl {
 public:
  static constexpr std::int64_t finished_boundary = -1;  // hold(): the worker has no boundary left
  static constexpr std::int64_t not_started = -2;        // hold(): it has not reached its first yet

  // Worker thread, before the step after `steps_done`. Returns at once unless held or paused, in
  // which case `progress` shows it and the call waits for act(), resume(), fail_next() or stop().
  BoundaryOrder at_boundary(std::int64_t steps_done, WorkProgress& progress);
  // Worker thread: the loop is over; no boundary is left.
  void finished();
  // Worker thread: a new loop takes the slot (a worker respawned in place), with boundaries again.
  void reopen();

  // The boundary the worker will stop at (or stands at), holding it there until act().
  std::int64_t hold();
  // Releases a hold: the worker runs on to `boundary` and does `action` there (none: a cancel).
  void act(std::int64_t boundary, BoundaryAction action);
  void resume();     // ends a pause, or cancels one ordered at a boundary not yet reached
  void fail_next();  // the next boundary throws, paused or not
  void rescue();     // this and every later boundary answer with rescue, paused or not
  void stop();       // every wait ends with stop

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::int64_t boundary_ = not_started;  // the last boundary reached
  bool at_boundary_ = false;              // waiting at boundary_ rather than working past it
  bool finished_ = false, held_ = false, paused_ = false, fail_ = false, stop_ = false, rescue_ = false;
  std::int64_t target_ = -1;
  BoundaryAction action_ = BoundaryAction::none;
};

}  // namespace troupe::monitor
