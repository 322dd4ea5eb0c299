#pragma once
// The job's events (docs/protocols/job-events.md): what the job process says happened, typed, in
// order, for programs. The job supervisor and the job runner emit them into the job's one
// JobEvents log; the shell's `status`, the drill verdicts (through the control port, as the shell
// talks to the job) and the nodes' recovery counters read them. Logs stay for people: no program
// reads a log line.
//
// An event is a sequence number (1, 2, … for the whole job, across its attempts), the wall-clock
// time it happened (a step's end as its rank measured it, a failure's detection as the supervisor
// saw it), the attempt it belongs to, and one of the bodies below.

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include <caf/meta/type_name.hpp>
#include <caf/variant.hpp>

#include "actors/failure_kind.hpp"

namespace troupe::actors {

// How the job answered a failure or a change of its nodes (recovery_chosen, training_resumed).
enum class RecoveryRoute : std::uint8_t {
  in_place_from_replica,    // only what died respawned; its state from a replica over the data plane
  in_place_rollback,        // only what died respawned; every rank loads its own shards of a checkpoint
  restart_from_replica,     // every node restarts from the survivors' rescue snapshot
  restart_from_checkpoint,  // every node restarts from the newest checkpoint (or from the start)
  shrink,                   // every node restarts, some left out (fewer replicas, the same global batch)
  grow_in_place,            // nodes left out join the running job, their state from a survivor
  grow_by_restart,          // every node restarts with the nodes left out back
  restart,                  // the supervisor gives the failure to the job's restart (which says from where)
  rescue,                   // the survivors write their memory of the last completed step before the restart
  stop,                     // nothing recovers: the job ends
  island_left_out,          // DiLoCo: the lost islands left out of the syncs, their processes started again to rejoin
};
std::string_view to_string(RecoveryRoute route);

// What a worker reported of its checkpoints (checkpoint_noted).
enum class CheckpointOutcome : std::uint8_t {
  committed,  // every shard of the step is written and the step is the newest checkpoint
  failed,     // the save of the step failed (training goes on; the step stays uncommitted)
  skipped,    // a resume passed over the step: it did not pass its checks
};
std::string_view to_string(CheckpointOutcome outcome);

// A node process joined: at the job's start, in place of a lost one (replaced_pid), or to grow
// the running job (grown). `host`: its host-file line's (a spare line's, once it moved there).
struct node_joined {
  int node = -1;
  std::string host;
  int pid = 0;
  int replaced_pid = 0;  // the process this one replaces; 0: none
  bool grown = false;
};
// Every node joined; the ranks start.
struct job_started {
  int nodes = 0;
  int world_size = 0;
};
// A rank reported step `step` finished (the first rank to report it; every rank finishes a step
// within its gradient sum of the others). `loss` is that rank's.
struct step_trained {
  std::int64_t step = 0;
  double loss = 0;
};
// The supervisor saw a failure: its kind, the nodes and ranks it blames, and one line saying it.
struct failure_detected {
  FailureKind kind = FailureKind::node_exit;
  std::vector<int> nodes;
  std::vector<int> ranks;
  std::string reason;
};
// How the job goes on: the route, and one line for a person saying what the job does and why (the
// log's text after "recovery: ", or after "rejoin: " for a grow). `epoch`: the in-place recovery's
// (0 for routes that restart).
struct recovery_chosen {
  RecoveryRoute route = RecoveryRoute::stop;
  int epoch = 0;
  std::vector<int> nodes;  // started again, moved to a spare, left out or brought back
  std::string reason;
};
// An in-place recovery or grow moved state between ranks (in_place_from_replica, grow_in_place: from donors to
// receivers over the data plane) or read it back (in_place_rollback: every rank its own shards).
struct state_moved {
  RecoveryRoute route = RecoveryRoute::in_place_from_replica;
  int epoch = 0;
  std::int64_t bytes = 0;
  double seconds = 0;  // the slowest rank's
  std::vector<int> donors;
  std::vector<int> receivers;
};
// Every rank holds the state after step `after_step` and trains on. `seconds`: since the failure
// (or the order) the recovery answered, 0 where not known (a restart: its workers' first report).
struct training_resumed {
  RecoveryRoute route = RecoveryRoute::in_place_from_replica;
  int epoch = 0;
  std::int64_t after_step = 0;
  std::string from;                // "rank 0's memory", a checkpoint folder, or "the start (no checkpoint yet)"
  std::vector<int> ranks;          // respawned ranks (in place), the failed one first
  std::vector<int> nodes;          // node processes started again (in place)
  std::vector<int> replaced_pids;  // ... and the processes they replaced, in that order
  double seconds = 0;
  FailureKind kind = FailureKind::node_exit;  // the failure it answered (node_exit: none, a resume or grow)
};
// A rank the others keep waiting for (the job goes on).
struct straggler_named {
  int rank = -1;
  int node = -1;
  double waiting_share = 0;         // of its recent heartbeats, waiting for a message
  double others_waiting_share = 0;  // the least of every other rank's
};
// A rank's word on a checkpoint (the rank that commits, or the rank that failed or skipped it).
struct checkpoint_noted {
  CheckpointOutcome outcome = CheckpointOutcome::committed;
  int rank = -1;
  std::int64_t step = 0;
  std::string detail;  // the folder committed, or the error, or why it was skipped
};
// The job's layout changed: a shrink (nodes left out) or a grow (nodes back). Replicas and the
// batch each one takes afterwards (train.batch_size rows × per_replica micro-batches, where
// per_replica is train.grad_accum, or pipeline.microbatches with a pipeline).
struct layout_changed {
  RecoveryRoute route = RecoveryRoute::shrink;  // shrink, grow_in_place or grow_by_restart
  std::vector<int> nodes;                       // left out, or back
  int replicas_before = 0;
  int replicas_after = 0;
  int batch_size = 0;
  int per_replica = 0;
  std::string per_replica_key;  // "train.grad_accum" or "pipeline.microbatches"
};
// An attempt ended: its exit code (0 success; 1 a node failed or was lost; 2 nodes never joined
// or bad input), the kind (node_exit where it has none) and nodes to blame, and one line.
struct attempt_ended {
  int exit_code = 0;
  FailureKind kind = FailureKind::node_exit;
  std::vector<int> nodes;
  std::string reason;
};
// The job ended with `exit_code`; `counts` is its recovery counts as TROUPE_RESTARTS writes them.
struct job_ended {
  int exit_code = 0;
  int restarts = 0;
  std::string counts;
  std::string reason;
};

using job_event_body =
    caf::variant<node_joined, job_started, step_trained, failure_detected, recovery_chosen, state_moved,
                 training_resumed, straggler_named, checkpoint_noted, layout_changed, attempt_ended, job_ended>;

struct job_event {
  std::int64_t seq = 0;     // 1, 2, … across the whole job
  double unix_seconds = 0;  // when it happened (wall clock)
  int attempt = 0;          // the job's attempt (TROUPE_ATTEMPT) it happened in
  job_event_body body;
};

// The body's name as docs/protocols/job-events.md lists it: "node_joined", …
std::string_view event_name(const job_event_body& body);
// One line for a person: "node_joined node=1 pid=4711 host=h1".
std::string to_text(const job_event& event);

// The job's events, in one process, across its attempts: every emitter appends, readers take the
// events after the last sequence number they saw. Thread-safe (the supervisor's actor thread,
// the launcher's thread and the monitor all touch it). It keeps the newest `capacity` events (a
// step is one event): a reader further behind finds the gap in the sequence numbers.
class JobEvents {
 public:
  explicit JobEvents(std::size_t capacity = 100000);
  // Appends `body` as of now (or as of `unix_seconds`, when given > 0) in `attempt`; returns its seq.
  std::int64_t emit(int attempt, job_event_body body, double unix_seconds = 0);
  // The events with seq > `after`, at most `limit`, oldest first.
  std::vector<job_event> since(std::int64_t after, std::size_t limit = 1000) const;
  // Waits up to `timeout` for an event with seq > `after`; returns whether there is one.
  bool wait_after(std::int64_t after, std::chrono::milliseconds timeout) const;
  std::int64_t last_seq() const;

  // Readers over the control port (the monitor says for them) read up to `seq`. Before an
  // attempt's monitor goes, the job waits for them (wait_read): its last events are out of their
  // reach afterwards.
  void note_read(std::int64_t seq) const;
  bool read_by_anyone() const;
  // Waits up to `timeout` until a reader has read `seq`; at once, true, when no reader ever read.
  bool wait_read(std::int64_t seq, std::chrono::milliseconds timeout) const;

 private:
  std::size_t capacity_;
  mutable std::mutex mutex_;
  mutable std::condition_variable changed_;
  std::deque<job_event> events_;
  std::int64_t next_seq_ = 1;
  mutable std::int64_t read_up_to_ = -1;  // -1: no reader ever read
};

double unix_now();

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_joined& x) {
  return f(caf::meta::type_name("node_joined"), x.node, x.host, x.pid, x.replaced_pid, x.grown);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_started& x) {
  return f(caf::meta::type_name("job_started"), x.nodes, x.world_size);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_trained& x) {
  return f(caf::meta::type_name("step_trained"), x.step, x.loss);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, failure_detected& x) {
  return f(caf::meta::type_name("failure_detected"), x.kind, x.nodes, x.ranks, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recovery_chosen& x) {
  return f(caf::meta::type_name("recovery_chosen"), x.route, x.epoch, x.nodes, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, state_moved& x) {
  return f(caf::meta::type_name("state_moved"), x.route, x.epoch, x.bytes, x.seconds, x.donors, x.receivers);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, training_resumed& x) {
  return f(caf::meta::type_name("training_resumed"), x.route, x.epoch, x.after_step, x.from, x.ranks, x.nodes,
           x.replaced_pids, x.seconds, x.kind);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, straggler_named& x) {
  return f(caf::meta::type_name("straggler_named"), x.rank, x.node, x.waiting_share, x.others_waiting_share);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, checkpoint_noted& x) {
  return f(caf::meta::type_name("checkpoint_noted"), x.outcome, x.rank, x.step, x.detail);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, layout_changed& x) {
  return f(caf::meta::type_name("layout_changed"), x.route, x.nodes, x.replicas_before, x.replicas_after, x.batch_size,
           x.per_replica, x.per_replica_key);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, attempt_ended& x) {
  return f(caf::meta::type_name("attempt_ended"), x.exit_code, x.kind, x.nodes, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_ended& x) {
  return f(caf::meta::type_name("job_ended"), x.exit_code, x.restarts, x.counts, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_event& x) {
  return f(caf::meta::type_name("job_event"), x.seq, x.unix_seconds, x.attempt, x.body);
}

}  // namespace troupe::actors
