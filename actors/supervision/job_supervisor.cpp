#include "actors/supervision/job_supervisor.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include <spdlog/fmt/fmt.h>

#include "actors/local_messages.hpp"
#include "actors/failure_kind.hpp"
#include "comm/grid.hpp"
#include "monitor/log.hpp"
#include "monitor/straggler_watch.hpp"

namespace troupe::actors {
namespace {

using Clock = std::chrono::steady_clock;

// The job supervisor's phases (the header's diagram). Each but ended is a behaviour of its own,
// switched with become(): what a phase answers differs (the join deadline only while joining, the
// watchdog only while running, the writers' answers only while rescuing), so each behaviour lists
// its own handlers before every_phase()'s, instead of every handler checking a flag. `phase`
// says which one is current, for what CAF delivers outside behaviours (down_msg) and for the
// functions several phases share.
enum class JobPhase { joining, running, rescuing, ended };

// What the watchdog knows of a running node.
struct node_liveness {
  Clock::time_point last_heartbeat;
  std::vector<worker_beat> workers;  // from the last heartbeat, by slot
  std::vector<memory_beat> memory;   // the process's memory by kind, from the last heartbeat
  std::int64_t resident_bytes = 0, peak_resident_bytes = 0;
};

// Time since `worker` last finished a unit of work, as of `now`.
Clock::duration idle(const node_liveness& live, const worker_beat& worker, Clock::time_point now) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(worker.idle_seconds)) +
         (now - live.last_heartbeat);
}

struct job_supervisor_state {
  JobPlan plan;
  caf::actor listener;
  JobPhase phase = JobPhase::joining;
  std::map<int, join_msg> joined;  // by node index
  std::map<int, node_liveness> liveness;
  std::set<int> done;
  std::set<int> succeeded;  // done without a failure
  std::string pending_failure;  // a node's failure report, held briefly in case a peer was lost
  std::vector<int> pending_failed_nodes;
  std::set<int> lost;  // nodes whose supervisor went away
  // The rescue in progress (rescuing; see the header): the failure it answers, its writers (rank →
  // node index), and the step each writer reported.
  job_outcome_msg failure;
  std::map<int, int> rescue_writers;
  std::map<int, std::int64_t> rescued;
  monitor::StragglerWatch stragglers;
  std::set<int> stragglers_reported;  // by rank: each is named once
  // While the shell has the job paused its workers make no progress on purpose: the step
  // watchdog counts idle time only from the last resume.
  bool paused = false;
  Clock::time_point resumed_at{};
  // The in-place recovery in progress, if any (the header's running phase), and the epochs so far.
  struct in_place_recovery {
    int epoch = 0;
    Clock::time_point started;
    worker_failed_msg failed;
    std::map<int, recover_ready_msg> ready;  // by rank
    std::map<int, double> ready_after;       // by rank: seconds from `started`
    recover_plan_msg plan;
    std::map<int, recover_done_msg> done;  // by rank
    // Lost or silent nodes (their kind, else worker_exception; several where one host became
    // unreachable): each one's process is started again, by node index the pid it had and whether
    // the new one joined; the order every other node got, which the new processes get with their
    // start once every one of them joined.
    struct replaced_process {
      int old_pid = 0;
      bool joined = false;
    };
    FailureKind kind = FailureKind::worker_exception;
    std::map<int, replaced_process> replaced;
    recover_msg order;
    bool replacements_started = false;  // the new processes got their start: they know each other's address
    bool planned = false;  // `plan` was sent: ranks may be moving state
    // By rollback (recovery_path.hpp): chosen with the failure (no replica holds the failed rank's
    // state), or when the plan finds no rank holding the newest steps of some stage and shard; why.
    bool rollback = false;
    std::string why_rollback;
    std::int64_t steps_held = 0;  // the most steps any rank held: a rollback loses those since its checkpoint
    // An in-place grow (the shell's rejoin): no rank failed; `replaced` are the nodes that join.
    bool grow = false;
  };
  std::optional<in_place_recovery> in_place;
  int recovery_epoch = 0;
  std::vector<recovery_view> recoveries;  // done, for the shell's status
  std::vector<FailureKind> recovered_kinds;  // the failure kind of each of `recoveries` but the grows
  bool restart_logged = false;  // "recovery: restarting every node: ..." is said once
  // Since the job grew in place: each replica's rows per micro-batch and micro-batches (0: never grew).
  int batch_size = 0;
  int grad_accum = 0;
  // Fencing (docs/protocols/control-plane.md, "Attempts"): the job's attempt, each node's (the
  // attempt that started its current process), and the processes an in-place recovery replaced,
  // whose joins and messages are refused, each logged once.
  int attempt = 0;
  std::map<int, int> node_attempts;                        // by node index
  std::map<caf::actor_addr, join_msg> replaced_processes;  // by node supervisor
  std::set<caf::actor_addr> refusals_logged;
  static inline const char* name = "job_supervisor";

  bool started() const { return phase == JobPhase::running || phase == JobPhase::rescuing; }
};

using job_actor = caf::stateful_actor<job_supervisor_state>;

constexpr auto failure_settle_time = std::chrono::milliseconds(500);

// How often the watchdog looks: a quarter of the tightest limit, within [50 ms, 1 s].
std::chrono::milliseconds watchdog_period(const JobPlan& plan) {
  auto tightest = plan.heartbeat_timeout;
  if (plan.step_timeout.count() > 0) tightest = std::min(tightest, plan.step_timeout);
  return std::clamp(tightest / 4, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
}

std::string describe(const join_msg& m) {
  return "node " + std::to_string(m.node_index) + " (" + m.host + ", pid " + std::to_string(m.pid) + ")";
}

// The ranks of the job, 0 … world − 1: every rank a node runs.
int world_size(const JobPlan& plan) {
  int world = 0;
  for (const PlannedNode& n : plan.nodes) world += n.slots;
  return world;
}

// The job's grid (comm/grid.hpp) from its plan: every rank a node runs, over stages and shards.
comm::Grid job_grid(const JobPlan& plan) {
  const int world = world_size(plan);
  const int stages = std::max(1, plan.pipeline_stages), shards = std::max(1, plan.tensor_shards);
  return {std::max(1, world / (stages * shards)), stages, shards};
}

bool has_roles(const JobPlan& plan) { return plan.pipeline_stages > 1 || plan.tensor_shards > 1; }

// "pipeline stage 1 of replica 0", "tensor shard 1 of replica 0" or "pipeline stage 1, tensor
// shard 0 of replica 1" for `rank` in a job with stages or shards, "" otherwise.
std::string grid_role(const job_supervisor_state& st, int rank) {
  if (!has_roles(st.plan)) return {};
  const comm::Grid grid = job_grid(st.plan);
  const comm::GridCoord c = comm::grid_coord(grid, rank);
  std::string role;
  if (grid.pp > 1) role = "pipeline stage " + std::to_string(c.pp);
  if (grid.tp > 1) role += (role.empty() ? "" : ", ") + std::string("tensor shard ") + std::to_string(c.tp);
  return role + " of replica " + std::to_string(c.dp);
}

// describe(m), plus "; pipeline stage 1 of replica 0" (one per rank of the node) in a pipeline job.
std::string describe(const job_supervisor_state& st, const join_msg& m) {
  if (!has_roles(st.plan)) return describe(m);
  const PlannedNode& planned = st.plan.nodes.at(m.node_index);
  std::string roles;
  for (int rank = planned.first_rank; rank < planned.first_rank + planned.slots; ++rank)
    roles += (roles.empty() ? "" : ", ") + grid_role(st, rank);
  std::string text = describe(m);
  text.insert(text.size() - 1, "; " + roles);
  return text;
}

std::string seconds_text(Clock::duration d) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f s", std::chrono::duration<double>(d).count());
  return text;
}

// "rank 1 (node 1 (host, pid 7), heard from 0.4 s ago) in step 3, waiting 2.0 s for X", or
// "..., not waiting for any message".
std::string describe_activity(const job_supervisor_state& st, int node_index, const worker_beat& beat,
                              Clock::time_point now) {
  const join_msg& m = st.joined.at(node_index);
  const node_liveness& live = st.liveness.at(node_index);
  std::string role = grid_role(st, beat.rank);
  std::string text = "rank " + std::to_string(beat.rank) + " (" + describe(m) + (role.empty() ? "" : "; " + role) +
                     ", heard from " + seconds_text(now - live.last_heartbeat) + " ago)";
  // A beat between two units of work names none: the steps done say where the rank was.
  text += !beat.activity.empty() ? " in " + beat.activity
          : beat.steps_done > 0  ? " between steps, " + std::to_string(beat.steps_done) + " done"
                                 : " before its first step";
  if (beat.waiting_for.empty()) return text + ", not waiting for any message";
  char since[32];
  std::snprintf(since, sizeof since, "%.1f", beat.waiting_seconds);
  return text + ", waiting " + since + " s for " + beat.waiting_for;
}

// Why node `index`, last heard from at `live.last_heartbeat`, counts as silent at `now`.
std::string silence(const job_supervisor_state& st, int index, const node_liveness& live, Clock::time_point now) {
  std::string last_known;
  for (const worker_beat& beat : live.workers)
    last_known += (last_known.empty() ? "" : "; ") + describe_activity(st, index, beat, now);
  // Silence alone cannot tell a cut link from a stopped or hung process: say only what is known.
  return describe(st, st.joined.at(index)) + " sent no heartbeat for " + seconds_text(now - live.last_heartbeat) +
         " (limit " + seconds_text(st.plan.heartbeat_timeout) +
         "), reason unknown (unreachable, stopped or hung); last known " + last_known;
}

// Why the job must stop now, or "" while every running node beats and its workers progress;
// `silent_nodes` receives the nodes that stopped beating, when that is why.
std::string watchdog_verdict(const job_supervisor_state& st, Clock::time_point now, std::vector<int>& silent_nodes) {
  struct running_worker {
    int node_index;
    const worker_beat* beat;
  };
  std::vector<running_worker> running;
  bool stalled = false;
  Clock::duration longest{0};
  std::string silent;  // every silent node's, so that nodes stopped together are answered together
  for (const auto& [index, live] : st.liveness) {
    if (st.done.count(index)) continue;
    if (now - live.last_heartbeat > st.plan.heartbeat_timeout) {
      silent_nodes.push_back(index);
      silent += (silent.empty() ? "" : "; ") + silence(st, index, live, now);
      continue;
    }
    for (const worker_beat& beat : live.workers) {
      running.push_back({index, &beat});
      const Clock::duration worker_idle = std::min(idle(live, beat, now), now - st.resumed_at);
      longest = std::max(longest, worker_idle);
      if (st.plan.step_timeout.count() > 0 && worker_idle > st.plan.step_timeout) stalled = true;
    }
  }
  if (!silent_nodes.empty()) return silent;
  if (!stalled || st.paused || st.in_place) return {};
  // One stuck rank stalls the others in their next collective, so every running rank is
  // listed. Ranks waiting for a message are victims; one that is not is the likely culprit.
  std::stable_partition(running.begin(), running.end(),
                        [](const running_worker& w) { return w.beat->waiting_for.empty(); });
  std::string verdict =
      "no progress for " + seconds_text(longest) + " (limit " + seconds_text(st.plan.step_timeout) + "): ";
  for (std::size_t i = 0; i < running.size(); ++i)
    verdict += (i ? "; " : "") + describe_activity(st, running[i].node_index, *running[i].beat, now);
  return verdict;
}

// Names, once per rank, a rank the others keep waiting for; the job goes on.
void report_straggler(job_supervisor_state& st) {
  const auto straggler = st.stragglers.find();
  if (!straggler || !st.stragglers_reported.insert(straggler->rank).second) return;
  std::string where;
  for (const auto& [index, live] : st.liveness)
    for (const worker_beat& w : live.workers)
      if (w.rank == straggler->rank) where = describe(st, st.joined.at(index));
  monitor::logger("job")->warn(
      "straggler: rank {} ({}) keeps the others waiting: it was waiting for a message in {:.0f}% of its recent "
      "heartbeats, every other rank in {:.0f}% or more; the job goes on",
      straggler->rank, where, 100 * straggler->waiting_share, 100 * straggler->others_waiting_share);
}

// Whether `node_index` is a node whose process an in-place recovery started again, not yet joined.
bool awaited_replacement(const job_supervisor_state& st, int node_index) {
  if (!st.in_place) return false;
  const auto replaced = st.in_place->replaced.find(node_index);
  return replaced != st.in_place->replaced.end() && !replaced->second.joined;
}

// "attempt A is stale, the job is at attempt B" where a process of attempt `attempt` is older than
// node `node_index`'s current one; "" where it is not.
std::string stale_attempt(const job_supervisor_state& st, int node_index, int attempt) {
  const int current = st.node_attempts.at(node_index);
  if (attempt >= current) return {};
  return "attempt " + std::to_string(attempt) + " is stale, the job is at attempt " + std::to_string(current);
}

// Why `m` may not join, or "" when it may.
std::string join_refusal(const job_supervisor_state& st, const join_msg& m) {
  if (m.token != st.plan.token) return "wrong job token";
  if (m.build_id != st.plan.build_id) return "build " + m.build_id + " differs from the job's " + st.plan.build_id;
  if (m.config_hash != st.plan.config_hash) return "its config differs from the job's (hash mismatch)";
  if (m.node_index < 0 || m.node_index >= static_cast<int>(st.plan.nodes.size()))
    return "node index " + std::to_string(m.node_index) + " is not in the host file (" +
           std::to_string(st.plan.nodes.size()) + " nodes)";
  if (std::string stale = stale_attempt(st, m.node_index, m.attempt); !stale.empty()) return stale;
  const bool replacement = awaited_replacement(st, m.node_index);
  if (st.joined.count(m.node_index) && !replacement)
    return "node index " + std::to_string(m.node_index) + " has already joined";
  if (const int slots = st.plan.nodes.at(m.node_index).slots; static_cast<int>(m.comm_addresses.size()) != slots)
    return "it brings " + std::to_string(m.comm_addresses.size()) + " data-plane addresses for its " +
           std::to_string(slots) + " slots";
  if (st.phase != JobPhase::joining && !replacement) return "the job has already started";
  return {};
}

// Where an in-place recovery's state comes from, for its first log line.
std::string state_source(const job_supervisor_state::in_place_recovery& recovery) {
  if (!recovery.rollback) return "its state from a surviving replica over the data plane";
  return recovery.why_rollback + ", so every rank rolls back to the newest checkpoint";
}

// Whether the message being handled comes from a node process an in-place recovery replaced (its
// node supervisor): such a process is cut off from the job and its word counts for nothing. The
// first of its messages is logged, "refused node 1 (h1, pid N): attempt 0 is stale, …".
bool from_replaced_process(job_actor* self) {
  auto& st = self->state;
  const caf::strong_actor_ptr& sender = self->current_sender();
  if (!sender) return false;
  const auto replaced = st.replaced_processes.find(sender->address());
  if (replaced == st.replaced_processes.end()) return false;
  const join_msg& m = replaced->second;
  if (st.refusals_logged.insert(replaced->first).second)
    monitor::logger("job")->warn("refused {}: {}", describe(m), stale_attempt(st, m.node_index, m.attempt));
  return true;
}

// Where a failure is not recovered in place: the one line that says so and why.
void log_restart(job_supervisor_state& st, const std::string& why) {
  if (std::exchange(st.restart_logged, true)) return;
  monitor::logger("job")->warn("recovery: restarting every node: {}", why);
}

// A failure's outcome: exit code, kind and the nodes to blame (and to drop, for a drain).
job_outcome_msg failure_outcome(int exit_code, FailureKind kind, std::string reason, std::vector<int> nodes,
                                std::vector<int> drop = {}) {
  return {exit_code, std::move(reason), std::string(to_string(kind)), std::move(nodes), -1, std::move(drop)};
}

// Every phase ─► ended: stop_msg to every joined node, the outcome to the listener, quit.
void end_job(job_actor* self, job_outcome_msg outcome) {
  auto& st = self->state;
  if (st.phase == JobPhase::ended) return;
  st.phase = JobPhase::ended;
  for (FailureKind kind : st.recovered_kinds) outcome.in_place_recoveries.emplace_back(to_string(kind));
  auto log = monitor::logger("job");
  if (outcome.exit_code == 0)
    log->info("job finished: {}", outcome.reason);
  else if (outcome.rejoin)
    log->info("attempt ended: {}", outcome.reason);
  else
    log->error("job failed: {}", outcome.reason);
  for (auto& [index, m] : st.joined) self->send(m.node, stop_atom_v, stop_msg{outcome.exit_code, outcome.reason});
  self->send(st.listener, done_atom_v, std::move(outcome));
  self->quit();
}

void end_job(job_actor* self, int exit_code, const std::string& reason) { end_job(self, {exit_code, reason}); }

// The rescue is over: the job ends with the failure it answered, and the snapshot's step when
// every writer saved the same one.
void end_rescue(job_actor* self, const std::string& why_not) {
  auto& st = self->state;
  job_outcome_msg outcome = st.failure;
  if (why_not.empty()) {
    outcome.rescued_step = st.rescued.begin()->second;
    outcome.reason += "; rescue snapshot of step " + std::to_string(outcome.rescued_step) + " written";
  } else {
    outcome.reason += "; no rescue snapshot (" + why_not + ")";
  }
  end_job(self, std::move(outcome));
}

caf::behavior running(job_actor* self);
caf::behavior rescuing(job_actor* self);
bool replace_in_place(job_actor* self, const std::vector<int>& nodes, FailureKind kind, const std::string& reason);
void join_replacement(job_actor* self, const join_msg& m);
bool grow_in_place(job_actor* self);

// Whether every rank has finished the job's last step, `gone` (nodes lost or silent) included:
// each node reported success or its last heartbeat counted the last step; or every node but
// `gone` reported success, which none could have without every rank's part in every step (the
// heartbeat that would have said so may not have left before the loss). A node that reported a
// failure has not finished.
bool training_completed(const job_supervisor_state& st, const std::vector<int>& gone) {
  if (st.plan.last_step <= 0) return false;
  bool every_rank_counted = true, others_succeeded = true;
  for (const PlannedNode& planned : st.plan.nodes) {
    if (st.succeeded.count(planned.node_index)) continue;
    if (st.done.count(planned.node_index)) return false;
    if (std::find(gone.begin(), gone.end(), planned.node_index) == gone.end()) others_succeeded = false;
    auto live = st.liveness.find(planned.node_index);
    if (live == st.liveness.end()) return false;
    for (const worker_beat& worker : live->second.workers)
      if (worker.steps_done < st.plan.last_step) every_rank_counted = false;
  }
  return every_rank_counted || others_succeeded;
}

// A node lost or silent after every rank finished its last step takes nothing from the job: it
// ends as finished, without a rescue nobody would write or a restart that would train nothing.
// Returns whether it ended.
bool end_if_completed(job_actor* self, FailureKind kind, const std::string& reason, const std::vector<int>& gone) {
  auto& st = self->state;
  if (!node_process_gone(kind) || !training_completed(st, gone)) return false;
  end_job(self, 0, "every rank finished its last step (" + std::to_string(st.plan.last_step) + "); " + reason +
                       ", after training completed");
  return true;
}

// A node failed, was lost or went silent (joining or running): the job ends, after a rescue
// snapshot when one can be had (see the header).
void fail_job(job_actor* self, FailureKind kind, std::string reason, std::vector<int> nodes) {
  auto& st = self->state;
  if (st.phase != JobPhase::joining && st.phase != JobPhase::running) return;
  if (end_if_completed(self, kind, reason, nodes)) return;
  if (st.phase == JobPhase::running) {
    const RecoveryChoice choice = choose_recovery(st.plan.recovery, kind);
    log_restart(st, choice.in_place ? "the in-place recovery of this failure did not complete" : choice.why_not);
  }
  st.in_place.reset();
  job_outcome_msg failure = failure_outcome(1, kind, std::move(reason), std::move(nodes));
  const bool blames_a_node = kind != FailureKind::stall && !failure.failed_nodes.empty();
  if (st.plan.rescue_timeout.count() <= 0 || st.phase != JobPhase::running || !blames_a_node) {
    end_job(self, std::move(failure));
    return;
  }
  auto survives = [&](int node_index) {
    return st.joined.count(node_index) && !st.lost.count(node_index) && !st.done.count(node_index) &&
           std::find(failure.failed_nodes.begin(), failure.failed_nodes.end(), node_index) == failure.failed_nodes.end();
  };
  // For every (stage, shard), the first replica whose rank survives writes.
  const comm::Grid grid = job_grid(st.plan);
  std::map<int, int> writers;
  for (int stage = 0; stage < grid.pp; ++stage) {
    for (int shard = 0; shard < grid.tp; ++shard) {
      bool found = false;
      for (int replica = 0; replica < grid.dp && !found; ++replica) {
        const int rank = comm::grid_rank(grid, {replica, stage, shard});
        for (const PlannedNode& n : st.plan.nodes)
          if (rank >= n.first_rank && rank < n.first_rank + n.slots && survives(n.node_index)) {
            writers[rank] = n.node_index;
            found = true;
          }
      }
      if (!found) {
        st.failure = std::move(failure);
        std::string part;
        if (grid.pp > 1) part = " of pipeline stage " + std::to_string(stage);
        if (grid.tp > 1) part += (part.empty() ? " of" : ",") + std::string(" tensor shard ") + std::to_string(shard);
        end_rescue(self, "no surviving replica" + part);
        return;
      }
    }
  }
  // running ─► rescuing
  st.phase = JobPhase::rescuing;
  st.failure = std::move(failure);
  st.rescue_writers = std::move(writers);
  rescue_msg order{{}, st.failure.reason, self};
  std::string ranks;
  for (const auto& [rank, node] : st.rescue_writers) {
    order.writers.push_back(rank);
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
  }
  monitor::logger("job")->warn("{} ({}); asking rank(s) {} for a rescue snapshot of their memory", st.failure.reason,
                               st.failure.failure_kind, ranks);
  for (const auto& [index, m] : st.joined)
    if (survives(index)) self->send(m.node, rescue_atom_v, order);
  self->delayed_send(self, st.plan.rescue_timeout, rescue_atom_v);
  self->become(rescuing(self));
}

// The rescue's failure, once every rank turns out to have finished its last step (the survivors'
// reports and heartbeats may come after the loss): no snapshot is needed.
void end_if_completed_while_rescuing(job_actor* self) {
  auto& st = self->state;
  const auto kind = parse_failure_kind(st.failure.failure_kind);
  if (kind) end_if_completed(self, *kind, st.failure.reason, st.failure.failed_nodes);
}

// A writer's node failed or was lost before its snapshot was reported: the rescue cannot finish.
void check_rescue_writers(job_actor* self, int node_index, const std::string& what) {
  auto& st = self->state;
  for (const auto& [rank, node] : st.rescue_writers)
    if (node == node_index && !st.rescued.count(rank))
      return end_rescue(self, "rank " + std::to_string(rank) + "'s node " + what);
}

// Every planned node with its process's data-plane addresses as joined now.
start_msg current_start(const job_supervisor_state& st) {
  start_msg start;
  for (const PlannedNode& planned : st.plan.nodes) {
    const join_msg& m = st.joined.at(planned.node_index);
    start.nodes.push_back(
        {planned.node_index, planned.first_rank, planned.slots, m.host, m.comm_addresses, m.device_group_ids});
    start.world_size += planned.slots;
  }
  start.batch_size = st.batch_size;
  start.grad_accum = st.grad_accum;
  return start;
}

// A node's liveness as of `now`, before its first heartbeat: each slot's worker at step 0.
node_liveness fresh_liveness(const PlannedNode& planned, Clock::time_point now) {
  node_liveness live{now, {}};
  for (int slot = 0; slot < planned.slots; ++slot) live.workers.push_back({planned.first_rank + slot, 0, 0, 0, {}, {}, 0});
  return live;
}

// joining ─► running: every planned node joined.
void start_job(job_actor* self) {
  auto& st = self->state;
  st.phase = JobPhase::running;
  const start_msg start = current_start(st);
  monitor::logger("job")->info("all {} nodes joined; starting {} ranks", st.plan.nodes.size(), start.world_size);
  if (st.plan.on_start) st.plan.on_start();
  const auto now = Clock::now();
  for (auto& [index, m] : st.joined) {
    self->send(m.node, start_atom_v, start);
    st.liveness[index] = fresh_liveness(st.plan.nodes.at(index), now);
  }
  self->delayed_send(self, watchdog_period(st.plan), watchdog_atom_v);
  self->become(running(self));
}

// Every planned node as known now, for the monitor actor.
job_view_msg job_view(const job_supervisor_state& st) {
  const auto now = Clock::now();
  job_view_msg view{st.started(), {}, st.recoveries};
  for (const PlannedNode& planned : st.plan.nodes) {
    node_view node;
    node.node_index = planned.node_index;
    node.host = planned.host;
    node.done = st.done.count(planned.node_index) > 0;
    if (auto m = st.joined.find(planned.node_index); m != st.joined.end()) {
      node.pid = m->second.pid;
      node.node = m->second.node;
    }
    if (auto live = st.liveness.find(planned.node_index); live != st.liveness.end()) {
      node.heard_seconds_ago = std::chrono::duration<double>(now - live->second.last_heartbeat).count();
      node.workers = live->second.workers;
      node.memory = live->second.memory;
      node.resident_bytes = live->second.resident_bytes;
      node.peak_resident_bytes = live->second.peak_resident_bytes;
    }
    view.nodes.push_back(std::move(node));
  }
  return view;
}

// The joined node whose supervisor went away, marked lost; nullptr when `down` is none of them
// or a node that was done.
const join_msg* lost_node(job_supervisor_state& st, const caf::down_msg& down) {
  for (auto& [index, m] : st.joined) {
    if (m.node.address() != down.source || st.done.count(index)) continue;
    st.lost.insert(index);
    return &m;
  }
  return nullptr;
}

// A node supervisor went away. A down_msg is no behaviour's message in CAF 0.17 (it goes to the
// one down handler), so the phase decides here: joining and running fail the job (at once while
// joining); rescuing checks whether a writer was lost.
void on_node_down(job_actor* self, const caf::down_msg& down) {
  auto& st = self->state;
  // The old process of a node started again in place: its end is the recovery's doing.
  if (st.replaced_processes.count(down.source)) return;
  const join_msg* m = lost_node(st, down);
  if (!m) return;
  if (st.phase == JobPhase::rescuing) return check_rescue_writers(self, m->node_index, "was lost");
  std::string reason = "lost " + describe(st, *m) + ": " + to_string(down.reason);
  if (!st.pending_failure.empty()) reason += "; " + st.pending_failure;
  if (st.phase == JobPhase::running && replace_in_place(self, {m->node_index}, FailureKind::node_lost, reason)) return;
  fail_job(self, FailureKind::node_lost, std::move(reason), {m->node_index});
}

// The job's port saw the connection from `address` time out at the TCP level (the frame guard's
// keepalive, actors/control/frame_guard.hpp): every running node that joined from there is
// unreachable. A connection from anywhere else (a shell) is no node's.
void on_unreachable(job_actor* self, const std::string& address, double seconds) {
  auto& st = self->state;
  std::vector<int> nodes;
  std::string names, last_known;
  const auto now = Clock::now();
  for (const auto& [index, m] : st.joined) {
    // Each of the host's node processes has its own connection, so the second one's time-out may
    // come after the first one's recovery replaced them all.
    if (m.address != address || st.done.count(index) || st.replaced_processes.count(m.node.address())) continue;
    nodes.push_back(index);
    names += (names.empty() ? "" : ", ") + describe(st, m);
    auto live = st.liveness.find(index);
    if (live == st.liveness.end()) continue;
    for (const worker_beat& beat : live->second.workers)
      last_known += (last_known.empty() ? "" : "; ") + describe_activity(st, index, beat, now);
  }
  if (nodes.empty()) return;
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.1f s", seconds);
  std::string reason = names + " unreachable: its host " + address +
                       " answered no TCP acknowledgement or keepalive for " + waited +
                       " (a cut link or a host gone, not a process that exited or hung); last known " +
                       (last_known.empty() ? std::string("nothing") : last_known);
  // Every node of that host goes to a spare line of its own, in one in-place recovery.
  if (st.phase == JobPhase::running && replace_in_place(self, nodes, FailureKind::unreachable, reason)) return;
  fail_job(self, FailureKind::unreachable, std::move(reason), nodes);
}

// What every phase answers alike: joins (refused once the job has started), heartbeats, the
// monitor's view and pause, the shell's drain; and, dropped, what an earlier phase left behind
// (timers it armed, answers that come late).
caf::message_handler every_phase(job_actor* self) {
  return {
      [=](join_atom, join_msg& m) -> join_result_msg {
        auto& st = self->state;
        if (std::string refusal = join_refusal(st, m); !refusal.empty()) {
          const bool stale = m.token == st.plan.token && st.node_attempts.count(m.node_index) &&
                             !stale_attempt(st, m.node_index, m.attempt).empty();
          monitor::logger("job")->warn("{} {}: {}", stale ? "refused" : "rejected", describe(m), refusal);
          // A node with the job's token but another build or config is one of this job's own
          // nodes that can never join: waiting for the deadline would only hide why. Anyone
          // without the token is turned away and the job goes on.
          const bool own_node = m.token == st.plan.token;
          if (own_node && (m.build_id != st.plan.build_id || m.config_hash != st.plan.config_hash))
            end_job(self, failure_outcome(2, FailureKind::rejected, describe(m) + " cannot join: " + refusal,
                                          {m.node_index}));
          return {false, refusal};
        }
        if (awaited_replacement(st, m.node_index)) {
          join_replacement(self, m);
          return {true, {}};
        }
        monitor::logger("job")->info("{} joined", describe(m));
        self->monitor(m.node);
        st.joined.emplace(m.node_index, m);
        if (st.joined.size() == st.plan.nodes.size()) start_job(self);
        return {true, {}};
      },
      [=](heartbeat_atom, const heartbeat_msg& beat) {
        auto& st = self->state;
        auto it = st.liveness.find(beat.node_index);
        // Only a node's own supervisor speaks for it.
        if (from_replaced_process(self) || it == st.liveness.end() ||
            self->current_sender() != st.joined.at(beat.node_index).node.address())
          return;
        it->second.last_heartbeat = Clock::now();
        if (beat.workers.size() != it->second.workers.size()) return;
        it->second.workers = beat.workers;
        it->second.memory = beat.memory;
        it->second.resident_bytes = beat.resident_bytes;
        it->second.peak_resident_bytes = beat.peak_resident_bytes;
        for (const worker_beat& w : beat.workers)
          if (!w.activity.empty()) st.stragglers.sample(w.rank, !w.waiting_for.empty());
        if (st.phase == JobPhase::rescuing) end_if_completed_while_rescuing(self);
      },
      [=](view_atom) { return job_view(self->state); },
      [=](pause_atom, bool paused) {
        auto& st = self->state;
        if (st.paused && !paused) st.resumed_at = Clock::now();
        st.paused = paused;
      },
      [=](drain_atom, int node) {
        // The shell's `drain node N`, after its checkpoint committed: this attempt ends so that
        // launch restarts the job without that node.
        const std::string reason = "drain node " + std::to_string(node) + ": the shell asked to go on without it";
        end_job(self, failure_outcome(1, FailureKind::drained, reason, {node}, {node}));
      },
      [=](rejoin_atom) {
        // The shell's `rejoin`, after its checkpoint committed: the nodes an earlier attempt left
        // out join the running job, or this attempt ends so that launch restarts the job with them.
        if (grow_in_place(self)) return;
        job_outcome_msg outcome{1, "rejoin: the shell asked for the nodes the job went on without back"};
        outcome.rejoin = true;
        end_job(self, std::move(outcome));
      },
      [=](settle_atom) {},
      [=](unreachable_atom, const std::string&, double) {},
      [=](watchdog_atom) {},
      [=](timeout_atom) {},
      [=](rescue_atom) {},
      [=](rescue_atom, const rescue_done_msg&) {},
      // Outside running, a worker that threw is its node's failure, as the phase takes those.
      [=](recover_atom, const worker_failed_msg& m) {
        self->send(self, done_atom_v, node_done_msg{m.node_index, 1, m.reason, true});
      },
      [=](recover_atom, const recover_ready_msg&) {},
      [=](recover_atom, const recover_done_msg&) {},
      [=](recover_atom, int) {},
      [=](recover_atom, int, int, const std::string&) {},
  };
}

// joining and running: a node's report that its work ended.
void on_node_done(job_actor* self, const node_done_msg& d) {
  auto& st = self->state;
  auto it = st.joined.find(d.node_index);
  if (it == st.joined.end() || from_replaced_process(self)) return;
  st.done.insert(d.node_index);
  if (d.exit_code != 0) {
    // A peer's death usually reaches the survivors' collectives before its down_msg
    // reaches us: wait a moment so the message names the lost node, not its victims.
    if (st.pending_failure.empty()) self->delayed_send(self, failure_settle_time, settle_atom_v);
    st.pending_failure = describe(st, it->second) + " failed: " + d.reason;
    st.pending_failed_nodes.push_back(d.node_index);
  } else {
    st.succeeded.insert(d.node_index);
    if (st.done.size() == st.plan.nodes.size() && st.pending_failure.empty())
      end_job(self, 0, "all " + std::to_string(st.done.size()) + " nodes done");
  }
}

// A rank whose connection broke reports the peer at the other end as lost; when every node is
// alive that peer may be a victim too (a stalled rank's peers give up on it and close). The last
// heartbeats tell more: when every other rank was waiting for a message and one was not, that
// one is the likely cause. Returns ", the likely cause: rank …; last heartbeats: …", or "" when
// the heartbeats do not single one out.
std::string likely_cause_of_comm_failure(const job_supervisor_state& st, Clock::time_point now) {
  const node_liveness* culprit_live = nullptr;
  const worker_beat* culprit = nullptr;
  int culprit_node = -1;
  std::string waiting;
  for (const auto& [index, live] : st.liveness) {
    for (const worker_beat& beat : live.workers) {
      if (!beat.waiting_for.empty()) {
        waiting += "; " + describe_activity(st, index, beat, now);
        continue;
      }
      if (culprit) return {};  // two ranks not waiting: nothing singles one out
      culprit_live = &live, culprit = &beat, culprit_node = index;
    }
  }
  if (!culprit || waiting.empty()) return {};
  return ", the likely cause: " + describe_activity(st, culprit_node, *culprit, now) + ", no progress for " +
         seconds_text(idle(*culprit_live, *culprit, now)) + " while every other rank waited (" + waiting.substr(2) + ")";
}

// The failure a node reported, once settled. Nodes that reported a failure are not survivors;
// the job's own done set says so.
void on_settled(job_actor* self) {
  auto& st = self->state;
  std::string reason = st.pending_failure;
  // The comm library's errors start "comm: " (comm/engine.cpp); a node relays its rank's error.
  if (reason.find("comm: ") != std::string::npos) reason += likely_cause_of_comm_failure(st, Clock::now());
  fail_job(self, FailureKind::worker_exception, std::move(reason), st.pending_failed_nodes);
}

// In place ─► restart: the line that says why, then the failed worker's node failed as it would
// have without in-place recovery. `failed` is a copy: it may be the recovery's own, which ends here.
void restart_instead(job_actor* self, const worker_failed_msg failed, const std::string& why) {
  auto& st = self->state;
  log_restart(st, why);
  st.in_place.reset();
  on_node_done(self, node_done_msg{failed.node_index, 1, failed.reason, true});
}

// A worker that throws again before finishing a step since its last in-place recovery would only
// be respawned into the same failure (a bug at one step): "" when that is not so, else why.
// Heartbeats lag, so a rank that did finish a step may still look stuck: then the job restarts,
// the safe side.
std::string repeated_failure(const job_supervisor_state& st, int rank) {
  const recovery_view* last = nullptr;
  for (const recovery_view& r : st.recoveries)
    if (r.rank == rank) last = &r;
  if (!last) return {};
  for (const auto& [index, live] : st.liveness)
    for (const worker_beat& beat : live.workers)
      if (beat.rank == rank && beat.steps_done > last->steps) return {};
  return "rank " + std::to_string(rank) + " failed again before finishing a step after step " +
         std::to_string(last->steps) + ", where its in-place recovery of epoch " + std::to_string(last->epoch) +
         " went on from";
}

// running: a node's worker threw. In place where it applies: every node gets the order (the
// failed worker's node respawns it, every other worker gives up its step).
void on_worker_failed(job_actor* self, const worker_failed_msg& failed) {
  auto& st = self->state;
  auto node = st.joined.find(failed.node_index);
  if (node == st.joined.end() || from_replaced_process(self)) return;
  const RecoveryChoice choice = choose_recovery(st.plan.recovery, FailureKind::worker_exception);
  if (!choice.in_place) return restart_instead(self, failed, choice.why_not);
  if (st.in_place)
    return restart_instead(self, failed,
                           "rank " + std::to_string(failed.rank) + " failed during the in-place recovery of epoch " +
                               std::to_string(st.in_place->epoch));
  if (!st.pending_failure.empty() || !st.lost.empty() || !st.done.empty())
    return restart_instead(self, failed, "another node failed, was lost or finished at the same time");
  if (const std::string repeat = repeated_failure(st, failed.rank); !repeat.empty())
    return restart_instead(self, failed, repeat);
  st.in_place = job_supervisor_state::in_place_recovery{++st.recovery_epoch, Clock::now(), failed, {}, {}, {}};
  st.in_place->rollback = choice.rollback;
  if (choice.rollback) st.in_place->why_rollback = no_replica_reason(st.plan.recovery, failed.rank);
  monitor::logger("job")->warn("rank {} ({}) failed: {}; recovery: in place (epoch {}): respawning its worker in its "
                               "process, {}",
                               failed.rank, describe(st, node->second), failed.reason, st.recovery_epoch,
                               state_source(*st.in_place));
  const recover_msg order{st.recovery_epoch, {failed.rank}, "rank " + std::to_string(failed.rank) + " failed",
                          caf::actor_cast<caf::actor>(self), failed.steps_done};
  for (const auto& [index, m] : st.joined) self->send(m.node, recover_atom_v, order);
  self->delayed_send(self, st.plan.recovery_timeout, recover_atom_v, st.recovery_epoch);
}

// What the launcher does first to silent `nodes`, for the log.
const char* silent_killed(const std::vector<int>& nodes) {
  return nodes.size() == 1 ? " (the silent one killed first)" : " (the silent ones killed first)";
}

// "node 2" or "nodes 2 and 3" or "nodes 1, 2 and 3".
std::string nodes_text(const std::vector<int>& nodes) {
  std::string text = nodes.size() == 1 ? "node " : "nodes ";
  for (std::size_t i = 0; i < nodes.size(); ++i)
    text += (i == 0 ? "" : i + 1 == nodes.size() ? " and " : ", ") + std::to_string(nodes[i]);
  return text;
}

// Starts the processes of `nodes` again for `recovery` (JobPlan::replace_nodes): each becomes the
// job's next attempt, its ranks replacements in the recovery's order. Returns where each went, for
// the log ("node 1's process again on its host h1, ..."), or "" with `why_not` set where none could.
std::string start_again(job_supervisor_state& st, job_supervisor_state::in_place_recovery& recovery,
                        const std::vector<int>& nodes, FailureKind kind, std::string& why_not) {
  std::vector<FailureKind> in_place = st.recovered_kinds;
  in_place.push_back(kind);
  std::vector<NodeToReplace> wanted;
  for (int index : nodes) wanted.push_back({index, st.joined.at(index).peak_flops});
  const NodeReplacements where = st.plan.replace_nodes(wanted, st.attempt + 1, in_place);
  if (!where.why_not.empty()) {
    why_not = where.why_not;
    return {};
  }
  TROUPE_CHECK(where.nodes.size() == nodes.size(), "replace_nodes places every node it was given, or none");
  // The new processes are their nodes' next attempt: the old ones, should they come back, are refused.
  ++st.attempt;
  std::string placed;
  for (const NodeReplacement& replacement : where.nodes) {
    const int index = replacement.node_index;
    st.node_attempts[index] = st.attempt;
    const join_msg& old = st.joined.at(index);
    st.replaced_processes[old.node.address()] = old;
    recovery.replaced[index] = {old.pid, false};
    PlannedNode& planned = st.plan.nodes.at(index);
    placed += (placed.empty() ? "" : ", ") + ("node " + std::to_string(index) + "'s process again ") +
              (replacement.spare ? "on the spare host " + replacement.host + " (node " + std::to_string(index) +
                                       "'s host " + planned.host + " is unreachable; the spare is now used)"
                                 : "on its host " + replacement.host);
    planned.host = replacement.host;
    st.lost.erase(index);
    st.liveness.erase(index);  // silent until its new process joins; the watchdog skips it
    for (int rank = planned.first_rank; rank < planned.first_rank + planned.slots; ++rank) {
      if (std::find(recovery.order.failed_ranks.begin(), recovery.order.failed_ranks.end(), rank) ==
          recovery.order.failed_ranks.end())
        recovery.order.failed_ranks.push_back(rank);
      // What its old process said in this recovery no longer holds.
      recovery.ready.erase(rank);
      recovery.ready_after.erase(rank);
      recovery.done.erase(rank);
    }
  }
  return placed;
}

// running, during an in-place recovery that has not made its plan yet: `nodes` were lost or went
// silent too. Their processes are started again within the same recovery, and the plan waits for
// their new processes as it waits for the first ones. Returns false where it cannot (the plan is
// made: ranks may already be moving state; or no place for them), the restart's reason logged.
bool widen_in_place(job_actor* self, const std::vector<int>& nodes, FailureKind kind, const std::string& reason) {
  auto& st = self->state;
  auto& recovery = *st.in_place;
  const std::string what = nodes_text(nodes) + (nodes.size() == 1 ? " was " : " were ") +
                           (kind == FailureKind::hang ? "silent" : "lost") + " during the in-place recovery of epoch " +
                           std::to_string(recovery.epoch);
  if (recovery.grow) {
    log_restart(st, what + ", which was growing the job");
    return false;
  }
  if (recovery.planned || recovery.replacements_started) {
    log_restart(st, what + (recovery.planned ? ", after its plan was made" : ", after its new processes started"));
    return false;
  }
  std::string why_not;
  const std::string placed = start_again(st, recovery, nodes, kind, why_not);
  if (placed.empty()) {
    log_restart(st, what + "; " + why_not);
    return false;
  }
  monitor::logger("job")->warn("{}; recovery: in place (epoch {}) widened to {}: starting {}{}", reason,
                               recovery.epoch, nodes_text(nodes), placed, kind == FailureKind::hang ? silent_killed(nodes) : "");
  return true;
}

// running: `nodes` were lost or went silent (several only where their one host became unreachable).
// In place where it applies (recovery_path.hpp) and nothing else is failing: the launcher starts
// each one's process again (killing a silent one first), every surviving worker gives up its step
// (recover_msg), and the new processes join as the replacements (join_replacement). Nodes lost
// while such a recovery waits for its ranks join it (widen_in_place). Returns false where the job
// restarts instead, that line logged.
bool replace_in_place(job_actor* self, const std::vector<int>& nodes, FailureKind kind, const std::string& reason) {
  auto& st = self->state;
  if (end_if_completed(self, kind, reason, nodes)) return true;
  const RecoveryChoice choice = choose_recovery(st.plan.recovery, kind);
  TROUPE_CHECK(!choice.in_place || st.plan.replace_nodes, "recovery.replaces_nodes set without JobPlan::replace_nodes");
  const auto is_replaced = [&](int index) { return std::find(nodes.begin(), nodes.end(), index) != nodes.end(); };
  if (choice.in_place && st.in_place) return widen_in_place(self, nodes, kind, reason);
  std::string why_not = choice.why_not;
  if (choice.in_place && st.paused)
    why_not = "the shell has the job paused: its workers wait at their step boundary, where a rescue order reaches them";
  else if (choice.in_place && (!st.pending_failure.empty() || !st.done.empty() ||
                               std::any_of(st.lost.begin(), st.lost.end(), [&](int i) { return !is_replaced(i); })))
    why_not = "another node failed, was lost or finished at the same time";
  if (!why_not.empty()) {
    log_restart(st, why_not);
    return false;
  }
  job_supervisor_state::in_place_recovery recovery{
      st.recovery_epoch + 1, Clock::now(),
      worker_failed_msg{nodes.front(), st.plan.nodes.at(nodes.front()).first_rank, reason}};
  recovery.kind = kind;
  recovery.order = {recovery.epoch, {}, nodes_text(nodes) + " " + std::string(to_string(kind)),
                    caf::actor_cast<caf::actor>(self)};
  const std::string placed = start_again(st, recovery, nodes, kind, why_not);
  if (placed.empty()) {
    log_restart(st, why_not);
    return false;
  }
  ++st.recovery_epoch;
  recovery.rollback = choice.rollback;
  if (choice.rollback) recovery.why_rollback = no_replica_reason(st.plan.recovery, recovery.failed.rank);
  st.in_place = std::move(recovery);
  monitor::logger("job")->warn(
      "{}; recovery: in place (epoch {}): starting {}{}, every other node keeps its process; {}", reason,
      st.recovery_epoch, placed, kind == FailureKind::hang ? silent_killed(nodes) : "",
      state_source(*st.in_place));
  for (const auto& [index, m] : st.joined)
    if (!is_replaced(index)) self->send(m.node, recover_atom_v, st.in_place->order);
  self->delayed_send(self, st.plan.recovery_timeout, recover_atom_v, st.recovery_epoch);
  return true;
}

// A process started again in place of a lost or silent node joined. Once every replaced node's new
// process joined, each starts with every node's data-plane address (the other new ones' included),
// its workers as the recovery's replacements.
void join_replacement(job_actor* self, const join_msg& m) {
  auto& st = self->state;
  auto& recovery = *st.in_place;
  auto& replaced = recovery.replaced.at(m.node_index);
  if (recovery.grow)
    monitor::logger("job")->info("{} joined the running job", describe(m));
  else
    monitor::logger("job")->info("{} joined in place of pid {}", describe(m), replaced.old_pid);
  self->monitor(m.node);
  st.joined[m.node_index] = m;
  replaced.joined = true;
  st.liveness[m.node_index] = fresh_liveness(st.plan.nodes.at(m.node_index), Clock::now());
  if (!std::all_of(recovery.replaced.begin(), recovery.replaced.end(), [](const auto& r) { return r.second.joined; }))
    return;
  const start_msg start = current_start(st);
  recovery.replacements_started = true;
  for (const auto& [index, process] : recovery.replaced) self->send(st.joined.at(index).node, start_atom_v, start, recovery.order);
}

// The in-place recovery in progress cannot complete: the job fails as the failure it answered
// would have failed it, blaming the nodes it replaced (or the failed worker's).
void fail_in_place(job_actor* self, std::string reason) {
  const auto& recovery = *self->state.in_place;
  if (recovery.grow) {
    // The checkpoint the shell's rejoin committed first is where a restart grows the job from.
    job_outcome_msg outcome{1, "rejoin: growing in place failed (" + reason + "); growing by a restart instead"};
    outcome.rejoin = true;
    return end_job(self, std::move(outcome));
  }
  std::vector<int> nodes;
  for (const auto& [index, process] : recovery.replaced) nodes.push_back(index);
  if (nodes.empty()) nodes.push_back(recovery.failed.node_index);
  fail_job(self, recovery.kind, std::move(reason), std::move(nodes));
}

// Every rank is ready: the plan (recovery_path.hpp's plan_recovery) pairs every rank holding fewer
// steps than the most with a donor of its own pipeline stage and tensor shard; where no replica
// holds some rank's state, every rank rolls back to the newest checkpoint all of them can read
// (plan_rollback), and where there is none the job restarts every node.
void on_recover_ready(job_actor* self, const recover_ready_msg& ready) {
  auto& st = self->state;
  if (!st.in_place || ready.epoch != st.in_place->epoch) return;
  auto& recovery = *st.in_place;
  recovery.ready[ready.rank] = ready;
  recovery.ready_after[ready.rank] = std::chrono::duration<double>(Clock::now() - recovery.started).count();
  if (static_cast<int>(recovery.ready.size()) < world_size(st.plan)) return;
  std::map<int, std::int64_t> steps_done, checkpoint_steps;
  for (const auto& [rank, r] : recovery.ready) {
    steps_done[rank] = r.steps_done;
    checkpoint_steps[rank] = r.checkpoint_step;
    recovery.steps_held = std::max(recovery.steps_held, r.steps_done);
  }
  // No plan: the failure is the nodes', of the kind the recovery answered.
  auto restart = [&](const std::string& why) {
    if (recovery.replaced.empty()) return restart_instead(self, recovery.failed, why);
    log_restart(st, why);
    fail_in_place(self, recovery.failed.reason);
  };
  RecoveryPlan paired = recovery.rollback ? RecoveryPlan{} : plan_recovery(st.plan.recovery, steps_done);
  if (!paired.why_not.empty() && st.plan.recovery.checkpoints) {
    recovery.rollback = true;
    recovery.why_rollback = paired.why_not;
  }
  if (recovery.rollback) {
    paired = plan_rollback(checkpoint_steps);
    if (!paired.why_not.empty()) return restart(recovery.why_rollback + ", and " + paired.why_not);
  }
  if (!paired.why_not.empty()) return restart(paired.why_not);
  recover_plan_msg plan{recovery.epoch, paired.steps, std::move(paired.donors), std::move(paired.receivers), {},
                        paired.rollback};
  if (!recovery.replaced.empty()) {
    const start_msg current = current_start(st);
    for (const auto& [index, process] : recovery.replaced) plan.replaced.push_back(current.nodes.at(index));
  }
  std::string readiness;
  for (const auto& [rank, seconds] : recovery.ready_after)
    readiness += fmt::format("{}rank {} {:.2f} s", readiness.empty() ? "" : ", ", rank, seconds);
  if (plan.rollback) {
    const std::int64_t lost = recovery.steps_held - plan.steps;
    monitor::logger("job")->warn("recovery: in place by rollback to checkpoint step {} (epoch {}): {}; every rank "
                                 "loads its own shards of it, {} step{} lost (the most any rank held: {}); every "
                                 "rank was ready ({} after the failure was seen)",
                                 plan.steps, recovery.epoch, recovery.why_rollback, lost, lost == 1 ? "" : "s",
                                 recovery.steps_held, readiness);
  } else {
    std::string pairs;
    for (std::size_t i = 0; i < plan.receivers.size(); ++i)
      pairs += fmt::format("{}rank {} to rank {}", i ? ", " : "", plan.donors[i], plan.receivers[i]);
    monitor::logger("job")->info("in-place recovery (epoch {}): every rank is ready ({} after the failure was seen); "
                                 "each goes on after step {}, state given by {}",
                                 recovery.epoch, readiness, plan.steps, pairs);
  }
  recovery.plan = plan;
  recovery.planned = true;
  for (const auto& [rank, r] : recovery.ready) self->send(r.worker, recover_atom_v, plan);
}

// What an in-place recovery's plan moved over the data plane, by its receivers' reports: the bytes,
// the slowest receiver's seconds, and the donors ("0" or "0, 2").
struct StateMoved {
  std::int64_t bytes = 0;
  double seconds = 0;
  std::set<int> donors;
  std::string donor_list;
};
StateMoved state_moved(const job_supervisor_state::in_place_recovery& recovery) {
  StateMoved moved;
  for (std::size_t i = 0; i < recovery.plan.receivers.size(); ++i) {
    const recover_done_msg& received = recovery.done.at(recovery.plan.receivers[i]);
    moved.bytes += received.bytes;
    moved.seconds = std::max(moved.seconds, received.seconds);
    moved.donors.insert(recovery.plan.donors[i]);
  }
  for (int rank : moved.donors) moved.donor_list += (moved.donor_list.empty() ? "" : ", ") + std::to_string(rank);
  return moved;
}

// Every rank of a grow in place has its state: every node learns the grown job's start (a worker
// respawned later starts from it), the launcher that the job runs grown, and the log how it went.
void finish_grow(job_actor* self) {
  auto& st = self->state;
  auto& recovery = *st.in_place;
  const StateMoved moved = state_moved(recovery);
  std::string joined;
  for (const auto& [index, process] : recovery.replaced)
    joined += (joined.empty() ? "" : ", ") + describe(st.joined.at(index));
  const start_msg grown = current_start(st);
  for (const auto& [index, m] : st.joined) self->send(m.node, start_atom_v, grown);
  if (st.plan.grew) st.plan.grew();
  const double seconds = std::chrono::duration<double>(Clock::now() - recovery.started).count();
  st.recoveries.push_back({"grow", recovery.epoch, recovery.order.failed_ranks.front(),
                           moved.donors.empty() ? -1 : *moved.donors.begin(),
                           recovery.plan.steps, moved.bytes, seconds, static_cast<int>(recovery.replaced.size()),
                           recovery.order.failed_ranks});
  monitor::logger("job")->warn(
      "rejoin: grown in place in {:.3f} s (epoch {}): {} joined, every other node kept its process; {} bytes of state "
      "from rank{} {} over the data plane in {:.3f} s; every rank goes on after step {} as {} ranks, each of {} "
      "micro-batch(es) of {}",
      seconds, recovery.epoch, joined, moved.bytes, moved.donors.size() > 1 ? "s" : "", moved.donor_list, moved.seconds,
      recovery.plan.steps,
      grown.world_size, grown.grad_accum, grown.batch_size);
  st.in_place.reset();
  st.resumed_at = Clock::now();
}

// The shell's rejoin (its checkpoint committed) while the job runs: where in place grows
// (recovery_path.hpp's choose_grow) and nothing else is failing or recovering, the launcher starts
// the nodes the job went on without (JobPlan::grow_nodes), numbered after the job's; every node
// gets the grow order, and the new processes join as the replacements of a lost node do. Returns
// false where the job grows by a restart instead, that reason logged.
bool grow_in_place(job_actor* self) {
  auto& st = self->state;
  if (!st.plan.grow_nodes) return false;
  std::string why_not = choose_grow(st.plan.recovery).why_not;
  if (why_not.empty() && st.phase != JobPhase::running) why_not = "the job is not running";
  if (why_not.empty() && st.in_place)
    why_not = "the in-place recovery of epoch " + std::to_string(st.in_place->epoch) + " is in progress";
  if (why_not.empty() && st.paused) why_not = "the shell has the job paused";
  if (why_not.empty() && (!st.pending_failure.empty() || !st.lost.empty() || !st.done.empty()))
    why_not = "a node failed, was lost or finished";
  GrownNodes grown;
  if (why_not.empty()) {
    grown = st.plan.grow_nodes(st.attempt + 1);
    why_not = grown.why_not;
  }
  if (!why_not.empty()) {
    monitor::logger("job")->warn("rejoin: growing by restarting every node: {}", why_not);
    return false;
  }
  TROUPE_CHECK(!grown.nodes.empty(), "grow_nodes started no node and gave no reason");
  ++st.attempt;
  const int before = world_size(st.plan);
  int after = before;
  for (const PlannedNode& node : grown.nodes) after += node.slots;
  const std::string reason = "the job grows from " + std::to_string(before) + " to " + std::to_string(after) + " ranks";
  job_supervisor_state::in_place_recovery recovery{
      st.recovery_epoch + 1, Clock::now(),
      worker_failed_msg{grown.nodes.front().node_index, grown.nodes.front().first_rank, reason}};
  recovery.grow = true;
  std::vector<int> indices;
  for (const PlannedNode& node : grown.nodes) {
    TROUPE_CHECK(node.node_index == static_cast<int>(st.plan.nodes.size()) && node.first_rank == world_size(st.plan),
                 "grow_nodes numbers its nodes and ranks after the job's");
    st.plan.nodes.push_back(node);
    st.node_attempts[node.node_index] = st.attempt;
    recovery.replaced[node.node_index] = {0, false};
    indices.push_back(node.node_index);
    for (int rank = node.first_rank; rank < node.first_rank + node.slots; ++rank)
      recovery.order.failed_ranks.push_back(rank);
  }
  TROUPE_CHECK(after == world_size(st.plan), "the grown plan counts every new rank");
  st.plan.config_hash = grown.config_hash;
  st.plan.recovery.data_parallel = after / (st.plan.pipeline_stages * st.plan.tensor_shards);
  st.batch_size = grown.batch_size;
  st.grad_accum = grown.grad_accum;
  recovery.order.epoch = recovery.epoch;
  recovery.order.reason = reason;
  recovery.order.job = caf::actor_cast<caf::actor>(self);
  recovery.order.grown_world = after;
  recovery.order.grown_batch_size = grown.batch_size;
  recovery.order.grown_grad_accum = grown.grad_accum;
  ++st.recovery_epoch;
  st.in_place = std::move(recovery);
  monitor::logger("job")->warn("rejoin: growing in place (epoch {}) from {} to {} ranks: starting {}, every running "
                               "node keeps its process; each replica then sums {} micro-batch(es) of {}",
                               st.recovery_epoch, before, after, nodes_text(indices), grown.grad_accum,
                               grown.batch_size);
  for (const auto& [index, m] : st.joined) self->send(m.node, recover_atom_v, st.in_place->order);
  self->delayed_send(self, st.plan.recovery_timeout, recover_atom_v, st.recovery_epoch);
  return true;
}

// Every rank has its state: the job runs on, and says how the recovery went.
void on_recover_done(job_actor* self, const recover_done_msg& done) {
  auto& st = self->state;
  if (!st.in_place || done.epoch != st.in_place->epoch) return;
  auto& recovery = *st.in_place;
  if (!done.error.empty()) {
    log_restart(st, "rank " + std::to_string(done.rank) + " could not take part in the in-place recovery: " + done.error);
    return fail_in_place(self, recovery.failed.reason + "; in-place recovery failed: " + done.error);
  }
  recovery.done[done.rank] = done;
  if (static_cast<int>(recovery.done.size()) < world_size(st.plan)) return;
  if (recovery.grow) return finish_grow(self);
  const StateMoved moved = state_moved(recovery);
  std::int64_t bytes = moved.bytes;
  double transfer = moved.seconds;
  // A rollback moves nothing: every rank read its own shards of the checkpoint.
  if (recovery.plan.rollback)
    for (const auto& [rank, d] : recovery.done) {
      bytes += d.bytes;
      transfer = std::max(transfer, d.seconds);
    }
  int donor = -1;  // the failed rank's
  for (std::size_t i = 0; i < recovery.plan.receivers.size(); ++i)
    if (recovery.plan.receivers[i] == recovery.failed.rank) donor = recovery.plan.donors[i];
  const double seconds = std::chrono::duration<double>(Clock::now() - recovery.started).count();
  std::vector<int> respawned_ranks{recovery.failed.rank};
  for (int rank : recovery.order.failed_ranks)
    if (rank != recovery.failed.rank) respawned_ranks.push_back(rank);
  st.recoveries.push_back({"in_place", recovery.epoch, recovery.failed.rank, donor, recovery.plan.steps, bytes, seconds,
                           static_cast<int>(recovery.replaced.size()), std::move(respawned_ranks)});
  st.recovered_kinds.push_back(recovery.kind);
  const std::string source = recovery.plan.rollback ? "checkpoint" : "replica";
  for (const auto& [index, m] : st.joined)
    self->send(m.node, recover_atom_v, st.recoveries.back().path, source, std::string(to_string(recovery.kind)));
  std::string respawned;
  if (recovery.replaced.empty())
    respawned = "rank " + std::to_string(recovery.failed.rank) + " respawned in node " +
                std::to_string(recovery.failed.node_index) + "'s process (pid " +
                std::to_string(st.joined.at(recovery.failed.node_index).pid) + ", kept)";
  for (const auto& [index, process] : recovery.replaced)
    respawned += (respawned.empty() ? "" : "), ") + ("node " + std::to_string(index) + "'s process started again on ") +
                 st.plan.nodes.at(index).host + " (pid " + std::to_string(st.joined.at(index).pid) + ", was " +
                 std::to_string(process.old_pid);
  if (!recovery.replaced.empty()) respawned += "; every other node kept its process)";
  if (recovery.plan.rollback)
    monitor::logger("job")->warn(
        "recovery: in place done in {:.3f} s (epoch {}): {}; every rank rolled back to checkpoint step {} ({} bytes of "
        "its own shards read by all ranks, the slowest in {:.3f} s); every rank goes on after step {}, {} step{} lost",
        seconds, recovery.epoch, respawned, recovery.plan.steps, bytes, transfer, recovery.plan.steps,
        recovery.steps_held - recovery.plan.steps, recovery.steps_held - recovery.plan.steps == 1 ? "" : "s");
  else
    monitor::logger("job")->warn(
        "recovery: in place done in {:.3f} s (epoch {}): {}; {} bytes of state from rank{} {} over the data plane in "
        "{:.3f} s; every rank goes on after step {}",
        seconds, recovery.epoch, respawned, bytes, moved.donors.size() > 1 ? "s" : "", moved.donor_list, transfer,
        recovery.plan.steps);
  st.in_place.reset();
  st.resumed_at = Clock::now();
}

void on_recover_timeout(job_actor* self, int epoch) {
  auto& st = self->state;
  if (!st.in_place || st.in_place->epoch != epoch) return;
  log_restart(st, "the in-place recovery of epoch " + std::to_string(epoch) + " did not complete within " +
                      seconds_text(st.plan.recovery_timeout));
  fail_in_place(self, st.in_place->failed.reason);
}

// A process started again in place of a lost or silent node exited: before it joined, the
// recovery cannot complete, and the job restarts (a node that cannot come back).
// A process the launcher started again in place exited (`pid`). Where that is the awaited
// replacement, the recovery fails. The process whose loss began this recovery may itself have been
// started again by an earlier one: its own exit, seen by the launcher after the job saw the loss,
// is expected.
void on_replacement_exit(job_actor* self, int node_index, int pid, const std::string& exit) {
  auto& st = self->state;
  if (!awaited_replacement(st, node_index) || pid == st.in_place->replaced.at(node_index).old_pid) return;
  log_restart(st, "node " + std::to_string(node_index) + "'s new process " + exit + " before it joined");
  fail_in_place(self, st.in_place->failed.reason + "; node " + std::to_string(node_index) + "'s new process " + exit +
                          " before it joined");
}

caf::behavior joining(job_actor* self) {
  const caf::message_handler phase{
      [=](done_atom, const node_done_msg& d) { on_node_done(self, d); },
      [=](settle_atom) { on_settled(self); },
      [=](timeout_atom) {
        auto& st = self->state;
        std::string missing;
        std::vector<int> missing_nodes;
        for (const auto& planned : st.plan.nodes)
          if (!st.joined.count(planned.node_index)) {
            missing += (missing.empty() ? "" : ", ") + std::to_string(planned.node_index) + " (" + planned.host + ")";
            missing_nodes.push_back(planned.node_index);
          }
        end_job(self, failure_outcome(2, FailureKind::join_timeout,
                                      "nodes " + missing + " did not join within " +
                                          std::to_string(st.plan.join_timeout.count() / 1000.0).substr(0, 5) + " s",
                                      missing_nodes));
      },
  };
  return phase.or_else(every_phase(self));
}

caf::behavior running(job_actor* self) {
  const caf::message_handler phase{
      [=](done_atom, const node_done_msg& d) { on_node_done(self, d); },
      [=](settle_atom) { on_settled(self); },
      [=](unreachable_atom, const std::string& address, double seconds) { on_unreachable(self, address, seconds); },
      [=](recover_atom, const worker_failed_msg& failed) { on_worker_failed(self, failed); },
      [=](recover_atom, const recover_ready_msg& ready) { on_recover_ready(self, ready); },
      [=](recover_atom, const recover_done_msg& done) { on_recover_done(self, done); },
      [=](recover_atom, int epoch) { on_recover_timeout(self, epoch); },
      [=](recover_atom, int node_index, int pid, const std::string& exit) {
        on_replacement_exit(self, node_index, pid, exit);
      },
      [=](watchdog_atom) {
        auto& st = self->state;
        std::vector<int> silent_nodes;
        if (std::string verdict = watchdog_verdict(st, Clock::now(), silent_nodes); !verdict.empty()) {
          if (silent_nodes.empty()) return fail_job(self, FailureKind::stall, verdict, {});
          if (!replace_in_place(self, silent_nodes, FailureKind::hang, verdict))
            return fail_job(self, FailureKind::hang, verdict, silent_nodes);
        }
        report_straggler(st);
        self->delayed_send(self, watchdog_period(st.plan), watchdog_atom_v);
      },
  };
  return phase.or_else(every_phase(self));
}

caf::behavior rescuing(job_actor* self) {
  const caf::message_handler phase{
      [=](done_atom, const node_done_msg& d) {
        auto& st = self->state;
        if (!st.joined.count(d.node_index) || from_replaced_process(self)) return;
        st.done.insert(d.node_index);
        if (d.exit_code != 0) return check_rescue_writers(self, d.node_index, "failed: " + d.reason);
        st.succeeded.insert(d.node_index);
        end_if_completed_while_rescuing(self);
      },
      [=](rescue_atom, const rescue_done_msg& d) {
        auto& st = self->state;
        if (!st.rescue_writers.count(d.rank)) return;
        if (!d.error.empty()) return end_rescue(self, "rank " + std::to_string(d.rank) + ": " + d.error);
        st.rescued[d.rank] = d.step;
        monitor::logger("job")->info("rank {} saved its memory of step {}", d.rank, d.step);
        if (st.rescued.size() < st.rescue_writers.size()) return;
        for (const auto& [rank, step] : st.rescued)
          if (step != st.rescued.begin()->second)
            return end_rescue(self, "the writers' last completed steps differ");
        end_rescue(self, {});
      },
      [=](rescue_atom) {
        end_rescue(self, "not every writer answered within " + seconds_text(self->state.plan.rescue_timeout));
      },
  };
  return phase.or_else(every_phase(self));
}

caf::behavior job_supervisor(job_actor* self, JobPlan plan, caf::actor listener) {
  self->state.plan = std::move(plan);
  self->state.listener = std::move(listener);
  self->state.attempt = self->state.plan.attempt;
  for (const PlannedNode& node : self->state.plan.nodes)
    self->state.node_attempts[node.node_index] = self->state.plan.attempt;
  self->delayed_send(self, self->state.plan.join_timeout, timeout_atom_v);
  self->set_down_handler([=](const caf::down_msg& down) { on_node_down(self, down); });
  return joining(self);
}

}  // namespace

caf::actor spawn_job_supervisor(caf::actor_system& system, JobPlan plan, caf::actor listener) {
  return system.spawn(job_supervisor, std::move(plan), std::move(listener));
}

}  // namespace troupe::actors
