#pragma once
// The message catalogue: every type that crosses a process boundary, in one type-ID block, each
// with its inspect() beside it. Tensor bytes never travel here — a message announces or
// completes a transfer that the data plane (comm/) carries. The protocol these messages form is
// written down in docs/protocols/control-plane.md and pinned by tests/actors/.
//
// Node-local messages (device pointers, stream handles) do not belong here: they cannot be
// serialized and get their own header.

#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/failure_kind.hpp"
#include "actors/job_events.hpp"
#include "actors/recovery_shape.hpp"
#include "monitor/work_progress.hpp"

namespace troupe::actors {

// Raw bytes (CAF 0.17 has no type ID for std::vector<char>): a UCX worker address, say.
struct byte_blob {
  std::vector<std::uint8_t> bytes;
};

// The bootstrap id of one device communicator (NCCL's 128-byte unique id), made by the rank
// that leads the group (ranks[0]) and relayed to every rank with the start message.
struct device_group_id {
  std::uint16_t group = 0;  // the grid group's id (comm/grid.hpp)
  int leader_rank = -1;
  byte_blob id;
};

// Node supervisor → job supervisor, first thing after connecting.
struct join_msg {
  std::string token;          // the job's secret; a wrong one is rejected and logged
  // The process's attempt (TROUPE_ATTEMPT): the job's attempt when it was started. A restart of the
  // job and an in-place replacement of a node each begin a new one; a join or message from an
  // attempt older than the one the job holds for that node is a stale process's, and refused.
  int attempt = 0;
  std::string build_id;       // troupe version + commit; must equal the job's
  std::uint64_t config_hash;  // of the resolved config; must equal the job's
  int node_index = -1;        // the host-file line this process was started for
  std::string host;
  int pid = 0;
  std::string address;  // the IPv4 address this node's connection to the job leaves from; empty if unknown
  std::vector<byte_blob> comm_addresses;  // data-plane address of each of the node's workers, by slot
  std::vector<device_group_id> device_group_ids;  // groups its workers lead (CUDA backends only)
  caf::actor node;            // the node supervisor, for start and stop
  // A rank's peak FLOP/s as this process measured it (or was given it, TROUPE_PEAK_FLOPS), the MFU
  // basis; 0 when it has none. A process started in place of this one is given it.
  std::int64_t peak_flops = 0;
};

// Job supervisor → node supervisor, the answer to join_msg.
struct join_result_msg {
  bool accepted = false;
  std::string reason;  // why not, when not accepted
};

// One node process as every peer learns of it at start.
struct node_entry {
  int node_index = -1;
  int first_rank = 0;
  int slots = 0;
  std::string host;
  std::vector<byte_blob> comm_addresses;  // by slot: rank first_rank + slot
  std::vector<device_group_id> device_group_ids;  // as the node brought them in join_msg
};

// Job supervisor → every node supervisor once all nodes have joined; again to every node once the
// job grew in place (what a worker respawned later starts from).
struct start_msg {
  int world_size = 0;
  std::vector<node_entry> nodes;  // by node index
  // The job grew in place: each step's global batch as the replicas split it now, rows per
  // micro-batch and micro-batches per replica (0: as the node's configuration says), and under
  // train.balance each replica's speed (empty: even).
  int batch_size = 0;
  int grad_accum = 0;
  std::vector<double> replica_speeds;
  // What the job's recovery decisions read (recovery_shape.hpp), as the job derived it: a node
  // reports a worker that threw for an in-place recovery when its mode says so.
  RecoveryShape recovery;
};

// Node supervisor → job supervisor: this node's work ended (exit_code 0) or failed.
struct node_done_msg {
  int node_index = -1;
  int exit_code = 0;
  std::string reason;
  // The worker's code threw (a bug, or the kill-worker drill): not a stop, a failed collective or
  // a training outcome such as divergence. Only such a failure can be recovered in place.
  bool threw = false;
};

// Job supervisor → node supervisors: stop now, the job is ending.
struct stop_msg {
  int exit_code = 0;
  std::string reason;
};

// Job supervisor → whoever started the job (in the job process): how it ended.
struct job_outcome_msg {
  int exit_code = 0;   // 0 success, 1 a node failed or was lost, 2 nodes never joined
  std::string reason;  // one line, naming the node when one is to blame
  FailureKind failure_kind = FailureKind::node_exit;  // actors/failure_kind.hpp; node_exit: none (a success)
  std::vector<int> failed_nodes;  // node indices to blame (lost, failed, hung, never joined)
  std::int64_t rescued_step = -1;  // a rescue snapshot of this step was committed; -1: none
  std::vector<int> drop_nodes;    // node indices the job asks to leave out of the next attempt (drain)
  // The shell asked for the nodes an earlier attempt left out back (`rejoin`): launch restarts
  // the job on every node of its host file, from the checkpoint the shell's order wrote.
  bool rejoin = false;
};

// Job supervisor → the surviving node supervisors → their workers, after a node was lost: write
// your in-memory state of the last completed step as a checkpoint, then stop. writers[s] is the
// rank that writes stage s (one surviving data-parallel replica per stage); the other ranks only
// stop. reply_to gets each writer's rescue_done_msg (the node supervisor sets itself there before
// forwarding, so a writer's report reaches the job before its node's failure report).
struct rescue_msg {
  std::vector<int> writers;
  std::string reason;
  caf::actor reply_to;
};

// Writer → its node supervisor → job supervisor: the rescue snapshot is committed (error empty)
// or could not be written.
struct rescue_done_msg {
  int rank = -1;
  std::int64_t step = 0;  // the last completed step the state is of
  std::string error;
};

// In-place recovery (docs/drills.md, "In-place recovery"; docs/protocols/control-plane.md).
// Node supervisor → job supervisor: one of this node's workers threw; the node waits for the job's
// word (a recover_msg, or a stop after the job chose to restart every node). `steps_done`: the
// steps the failed worker had completed, as its node counted them.
struct worker_failed_msg {
  int node_index = -1;
  int rank = -1;
  std::string reason;
  std::int64_t steps_done = -1;
};

// Job supervisor → every node supervisor → each of its workers: give up the step in flight, go
// on in comm epoch `epoch` (comm/grid.hpp's epoch_group_id), and report to `job` (recover_ready_msg).
// A node respawns the workers of `failed_ranks` it runs; they join as replacements.
// `failed_steps_done`: the steps the failed rank had completed when it threw (−1: not known, as
// for a lost node). A worker still in an earlier step has every message of that step from the
// failed rank coming, so it finishes the step before it takes the order (MailboxComm).
// A grow (grown_world > 0): no rank failed; `failed_ranks` are the ranks of the nodes that join,
// the world grows to grown_world ranks and each step's global batch is split as grown_batch_size
// rows × grown_grad_accum micro-batches per replica from the step everyone goes on after; under
// train.balance split over the replicas by grown_speeds (each replica's, in replica order; empty:
// even).
// A DiLoCo island rejoining (islands_kept not empty): the failed ranks are a lost island's, which
// the others left out (islands_msg); a new rank takes the outer state from the rank at its place in
// the first kept island after their next sync, and no other rank gives up its step.
struct recover_msg {
  int epoch = 0;
  std::vector<int> failed_ranks;
  std::string reason;
  caf::actor job;
  std::int64_t failed_steps_done = -1;
  int grown_world = 0;
  int grown_batch_size = 0;
  int grown_grad_accum = 0;
  std::vector<double> grown_speeds;
  std::vector<int> islands_kept;
};

// Worker → job supervisor: it left the step, holding the state after `steps_done` steps (−1: a
// replacement, holding nothing yet); `checkpoint_step`: the newest committed checkpoint it can read
// (−1: none, or no checkpoint.dir), for a rollback.
struct recover_ready_msg {
  int epoch = 0;
  int rank = -1;
  std::int64_t steps_done = -1;
  caf::actor worker;
  std::int64_t checkpoint_step = -1;
};

// Job supervisor → every worker of the recovery, once all are ready: go on after `steps`;
// `donors[i]` sends its state (parameters, AdamW moments) over the data plane to `receivers[i]`,
// whose steps done were fewer: a rank of the same pipeline stage and tensor shard in another
// data-parallel replica. `replaced`: the node processes started again for this recovery (a lost or
// silent node), with their new data-plane addresses; every other rank first connects to their
// ranks afresh (comm::Engine::connect replaces the old endpoint). Empty when every node kept its
// process. `rollback`: no replica holds some rank's state, so no donors: every rank loads its own
// shards of checkpoint `steps` instead.
struct recover_plan_msg {
  int epoch = 0;
  std::int64_t steps = 0;
  std::vector<int> donors;
  std::vector<int> receivers;
  std::vector<node_entry> replaced;
  bool rollback = false;
};

// Worker → job supervisor: its part of the recovery is done (error empty): the bytes of state it
// sent or received over the data plane and how long that took. A lost DiLoCo island's new rank
// sends it once it took the outer state: `steps`, the steps it goes on after (−1 otherwise).
struct recover_done_msg {
  int epoch = 0;
  int rank = -1;
  std::int64_t bytes = 0;
  double seconds = 0;
  std::string error;
  std::int64_t steps = -1;
};

// DiLoCo's islands left out and rejoining (docs/diloco.md, "Islands lost and rejoining").
// Job supervisor → every node supervisor of a present island → each of its workers. From now on the
// rank's outer group is the ranks at its place in the islands `present`, under the id
// comm::epoch_group_id(outer_group_id, epoch). Without `rejoining`: the islands missing from
// `present` were lost; the rank takes its next sync (or the one in flight, posted again) over the
// islands present, averaged over their count. With `rejoining`: those islands' new processes
// (`replaced`, with their data-plane addresses) wait for the outer state; after the first sync
// over the islands left, the rank of the first of them at each place sends it to the rejoining rank
// at that place, and every rank goes on over `present`, the rejoined islands included.
// The settle of a sync in flight when islands were left out (island_membership.hpp): each rank
// present answers a left-out order with islands_applied_msg to `job`; once every rank present did,
// the job sends the same `present` and epoch again with `applied` and `applied_islands` (one entry a
// rank of the job: the outer sums it applied, −1 where its island is absent, and the islands the last
// of them held), from which each rank finds the rank at its place that hands it the sums it missed.
struct islands_msg {
  int epoch = 0;
  std::vector<int> present;
  std::vector<int> rejoining;
  std::vector<node_entry> replaced;
  caf::actor job;
  std::vector<std::int64_t> applied;
  std::vector<int> applied_islands;
};

// A rank of a present island → the job, once after each islands_msg that left islands out, when no
// sum of its is landed and not yet agreed on by its island: the outer sums it applied (in order), and
// how many islands the last of them held (0: none applied).
struct islands_applied_msg {
  int epoch = 0;
  int rank = 0;
  std::int64_t applied = 0;
  int islands = 0;
};

// One finished step of a worker, for the shell's status, top, loss and trace.
struct step_beat {
  std::int64_t step = 0;
  double start_unix_seconds = 0;
  double seconds = 0;
  double loss = 0;
  std::int64_t tokens = 0;  // trained in the step by the whole job
  std::int64_t wire_bytes = 0;   // gradient compression: bytes this rank's sums carried in the step
  std::int64_t plain_bytes = 0;  // ... and would have carried uncompressed (0: not compressing)
  double compress_seconds = 0;   // ... and seconds spent compressing
  double lr = 0;                 // the step's learning rate
  double grad_norm = 0;          // ... and gradient norm (before clipping)
  bool validated = false;        // a validation ran after the step (train.val_every, the last step)
  double val_loss = 0;           // ... and its mean loss
  int experts = 0;               // a model with experts: experts per MoE block (0: none)
  std::vector<std::int64_t> expert_slots;  // ... and the step's token-slots per block and expert, block-major
  double batch_share = 0;  // the rank's data replica's share of the step's global batch (0: a pipeline or tensor-shard
                           // rank of an even split)
  double micro_batch_seconds = 0;  // ... and its measured seconds per micro-batch (train.balance dynamic; else 0)
  int islands = 0;                 // train.sync diloco: the islands in the last outer sync (0: not diloco)
  std::int64_t outer_syncs = 0;    // ... the fragment syncs landed since the process started
  std::int64_t outer_bytes = 0;    // ... the bytes this rank sent for the newest
  std::int64_t next_sync_step = 0;  // ... the step after which the next starts (0: none)
};

// What a worker noted for the job's events since its node's last heartbeat (monitor/work_progress.hpp).
struct worker_notice {
  monitor::NoticeKind kind = monitor::NoticeKind::resumed;
  std::int64_t step = 0;
  double unix_seconds = 0;
  std::string detail;
};

// How far one worker got, as its node's heartbeat reports it.
struct worker_beat {
  int rank = -1;
  std::int64_t steps_done = 0;
  std::int64_t progress = 0;  // finished units of work (steps, validations)
  double idle_seconds = 0;    // since the last of them, on the node's clock; too long = stuck
  std::string activity;       // "step 12"
  std::string waiting_for;    // empty, or what it waits for (message, peer rank) and since when
  double waiting_seconds = 0;
  std::vector<step_beat> recent_steps;  // its last finished steps (at most 64), oldest first
  std::vector<worker_notice> notices;   // noted since the last heartbeat, oldest first
};

// One kind of a node process's memory as its ledger counts it (compute/memory_ledger.hpp).
struct memory_beat {
  std::string device;      // host, cuda
  std::string kind;        // runtime, parameters, gathered_parameters, gradients, optimizer_state, ...
  std::int64_t bytes = 0;  // now
  std::int64_t peak = 0;   // the most since the process started
};

// Node supervisor → job supervisor, every fault.heartbeat_seconds once the job has started: the
// node is alive (a hung process keeps its TCP connection, so silence is the only sign) and how
// far each of its workers got, for the step watchdog and for naming what a stuck worker waits for;
// and the process's memory by kind beside its resident set, for the shell's memory command.
struct heartbeat_msg {
  int node_index = -1;
  std::vector<worker_beat> workers;  // by slot
  std::vector<memory_beat> memory;   // every kind on the host, then on the device (if any)
  std::int64_t resident_bytes = 0;       // /proc/self/statm now
  std::int64_t peak_resident_bytes = 0;  // VmHWM
};

// Monitor actor → node supervisor (request): an order for the node's workers, obeyed at their
// step boundaries (monitor/step_control.hpp), or a log level. Accepted only from the job process.
struct control_msg {
  std::string order;              // hold, act, resume, fail, log; rescue (the node's own, never sent)
  std::int64_t boundary = -1;     // act: the agreed boundary (steps done)
  std::string action;             // act: none (cancel), checkpoint, pause, checkpoint_and_hold; log: the level
  std::string subsystem;          // log: one logger, or empty for all
  int rank = -1;                  // fail: the rank whose worker fails
};

// Node supervisor → monitor actor, the answer to control_msg.
struct control_reply_msg {
  std::string error;                    // empty when obeyed
  std::vector<std::int64_t> boundaries;  // hold: each slot's boundary (-1 finished, -2 not started)
};

// `troupe shell` → monitor actor (request): one command line, with the job's token.
struct shell_request_msg {
  std::string token;
  std::string line;  // "status", "kill node 1", ...
};

// Monitor actor → `troupe shell`, the answer to shell_request_msg.
struct shell_reply_msg {
  bool ok = false;                // false: refused or failed; text says why
  std::string text;               // what the shell prints
  std::string attachment;         // trace: the Chrome trace JSON the shell writes to the named file
  int attempt = 0;                // 0 the job's first run, n after n restarts
  std::string restarted_after;    // attempt > 0: why the previous attempt ended
};

// `troupe drill` (or any program with the job's token) → monitor actor (request): the job's
// events after sequence number `after`, at most `limit` (docs/protocols/job-events.md).
struct events_request_msg {
  std::string token;
  std::int64_t after = 0;
  std::int32_t limit = 1000;
};

// Monitor actor → the asker: the events, oldest first, and the newest sequence number the job has
// (a reader that fell behind the log's capacity sees the gap); or why not (`error`).
// `attempt_ended`: this attempt's supervisor is gone and its monitor soon goes too; the next
// attempt's monitor answers on the same port.
struct events_reply_msg {
  std::string error;
  std::vector<job_event> events;
  std::int64_t last_seq = 0;
  bool attempt_ended = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, byte_blob& x) {
  return f(caf::meta::type_name("byte_blob"), x.bytes);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, device_group_id& x) {
  return f(caf::meta::type_name("device_group_id"), x.group, x.leader_rank, x.id);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_msg& x) {
  return f(caf::meta::type_name("join_msg"), x.token, x.attempt, x.build_id, x.config_hash, x.node_index, x.host, x.pid,
           x.address, x.comm_addresses, x.device_group_ids, x.node, x.peak_flops);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, join_result_msg& x) {
  return f(caf::meta::type_name("join_result_msg"), x.accepted, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_entry& x) {
  return f(caf::meta::type_name("node_entry"), x.node_index, x.first_rank, x.slots, x.host, x.comm_addresses,
           x.device_group_ids);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, start_msg& x) {
  return f(caf::meta::type_name("start_msg"), x.world_size, x.nodes, x.batch_size, x.grad_accum, x.replica_speeds,
           x.recovery);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, node_done_msg& x) {
  return f(caf::meta::type_name("node_done_msg"), x.node_index, x.exit_code, x.reason, x.threw);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, stop_msg& x) {
  return f(caf::meta::type_name("stop_msg"), x.exit_code, x.reason);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, job_outcome_msg& x) {
  return f(caf::meta::type_name("job_outcome_msg"), x.exit_code, x.reason, x.failure_kind, x.failed_nodes,
           x.rescued_step, x.drop_nodes, x.rejoin);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rescue_msg& x) {
  return f(caf::meta::type_name("rescue_msg"), x.writers, x.reason, x.reply_to);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, rescue_done_msg& x) {
  return f(caf::meta::type_name("rescue_done_msg"), x.rank, x.step, x.error);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_failed_msg& x) {
  return f(caf::meta::type_name("worker_failed_msg"), x.node_index, x.rank, x.reason, x.steps_done);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recover_msg& x) {
  return f(caf::meta::type_name("recover_msg"), x.epoch, x.failed_ranks, x.reason, x.job, x.failed_steps_done,
           x.grown_world, x.grown_batch_size, x.grown_grad_accum, x.grown_speeds, x.islands_kept);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, islands_msg& x) {
  return f(caf::meta::type_name("islands_msg"), x.epoch, x.present, x.rejoining, x.replaced, x.job, x.applied,
           x.applied_islands);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, islands_applied_msg& x) {
  return f(caf::meta::type_name("islands_applied_msg"), x.epoch, x.rank, x.applied, x.islands);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recover_ready_msg& x) {
  return f(caf::meta::type_name("recover_ready_msg"), x.epoch, x.rank, x.steps_done, x.worker, x.checkpoint_step);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recover_plan_msg& x) {
  return f(caf::meta::type_name("recover_plan_msg"), x.epoch, x.steps, x.donors, x.receivers, x.replaced,
           x.rollback);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, recover_done_msg& x) {
  return f(caf::meta::type_name("recover_done_msg"), x.epoch, x.rank, x.bytes, x.seconds, x.error, x.steps);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, step_beat& x) {
  return f(caf::meta::type_name("step_beat"), x.step, x.start_unix_seconds, x.seconds, x.loss, x.tokens, x.wire_bytes,
           x.plain_bytes, x.compress_seconds, x.lr, x.grad_norm, x.validated, x.val_loss, x.experts, x.expert_slots,
           x.batch_share, x.micro_batch_seconds, x.islands, x.outer_syncs, x.outer_bytes, x.next_sync_step);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_notice& x) {
  return f(caf::meta::type_name("worker_notice"), x.kind, x.step, x.unix_seconds, x.detail);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, worker_beat& x) {
  return f(caf::meta::type_name("worker_beat"), x.rank, x.steps_done, x.progress, x.idle_seconds, x.activity,
           x.waiting_for, x.waiting_seconds, x.recent_steps, x.notices);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, memory_beat& x) {
  return f(caf::meta::type_name("memory_beat"), x.device, x.kind, x.bytes, x.peak);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, heartbeat_msg& x) {
  return f(caf::meta::type_name("heartbeat_msg"), x.node_index, x.workers, x.memory, x.resident_bytes,
           x.peak_resident_bytes);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, control_msg& x) {
  return f(caf::meta::type_name("control_msg"), x.order, x.boundary, x.action, x.subsystem, x.rank);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, control_reply_msg& x) {
  return f(caf::meta::type_name("control_reply_msg"), x.error, x.boundaries);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shell_request_msg& x) {
  return f(caf::meta::type_name("shell_request_msg"), x.token, x.line);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, shell_reply_msg& x) {
  return f(caf::meta::type_name("shell_reply_msg"), x.ok, x.text, x.attachment, x.attempt, x.restarted_after);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, events_request_msg& x) {
  return f(caf::meta::type_name("events_request_msg"), x.token, x.after, x.limit);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, events_reply_msg& x) {
  return f(caf::meta::type_name("events_reply_msg"), x.error, x.events, x.last_seq, x.attempt_ended);
}

}  // namespace troupe::actors

CAF_BEGIN_TYPE_ID_BLOCK(troupe, caf::first_custom_type_id)
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::byte_blob))
  CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::actors::byte_blob>))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::join_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::join_result_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::node_entry))
  CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::actors::node_entry>))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::start_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::node_done_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::stop_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::job_outcome_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::device_group_id))
  CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::actors::device_group_id>))
  CAF_ADD_ATOM(troupe, troupe::actors, join_atom, "join")
  CAF_ADD_ATOM(troupe, troupe::actors, start_atom, "start")
  CAF_ADD_ATOM(troupe, troupe::actors, done_atom, "done")
  CAF_ADD_ATOM(troupe, troupe::actors, stop_atom, "stop")
  CAF_ADD_ATOM(troupe, troupe::actors, timeout_atom, "timeout")
  CAF_ADD_ATOM(troupe, troupe::actors, settle_atom, "settle")
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::worker_beat))
  CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::actors::worker_beat>))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::heartbeat_msg))
  CAF_ADD_ATOM(troupe, troupe::actors, heartbeat_atom, "heartbeat")
  CAF_ADD_ATOM(troupe, troupe::actors, watchdog_atom, "watchdog")
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::rescue_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::rescue_done_msg))
  CAF_ADD_ATOM(troupe, troupe::actors, rescue_atom, "rescue")
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::step_beat))
  CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::actors::step_beat>))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::control_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::control_reply_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::shell_request_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::shell_reply_msg))
  CAF_ADD_ATOM(troupe, troupe::actors, control_atom, "control")
  CAF_ADD_ATOM(troupe, troupe::actors, shell_atom, "shell")
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::memory_beat))
  CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::actors::memory_beat>))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::worker_failed_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::recover_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::recover_ready_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::recover_plan_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::recover_done_msg))
  CAF_ADD_ATOM(troupe, troupe::actors, recover_atom, "recover")
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::worker_notice))
  CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::actors::worker_notice>))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::RecoveryShape))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::node_joined))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::job_started))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::step_trained))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::failure_detected))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::recovery_chosen))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::state_moved))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::training_resumed))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::straggler_named))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::checkpoint_noted))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::layout_changed))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::attempt_ended))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::job_ended))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::job_event))
  CAF_ADD_TYPE_ID(troupe, (std::vector<troupe::actors::job_event>))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::events_request_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::events_reply_msg))
  CAF_ADD_ATOM(troupe, troupe::actors, events_atom, "events")
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::islands_msg))
  CAF_ADD_TYPE_ID(troupe, (troupe::actors::islands_applied_msg))
  CAF_END_TYPE_ID_BLOCK(troupe)
