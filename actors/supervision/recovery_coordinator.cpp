// The in-place recovery and grow protocol of the job supervisor (recovery_coordinator.hpp).

#include "actors/supervision/recovery_coordinator.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include <spdlog/fmt/fmt.h>

#include "actors/supervision/island_coordinator.hpp"
#include "actors/supervision/recovery_path.hpp"
#include "monitor/list_text.hpp"
#include "monitor/log.hpp"

namespace troupe::actors::supervision {
namespace {

using Goal = recovery_in_progress::Goal;
using Step = recovery_in_progress::Step;

RecoveryRoute route_of(const recovery_in_progress& recovery) {
  if (recovery.goal == Goal::grow) return RecoveryRoute::grow_in_place;
  if (recovery.goal == Goal::rejoin_island) return RecoveryRoute::island_left_out;
  return recovery.rollback ? RecoveryRoute::in_place_rollback : RecoveryRoute::in_place_from_replica;
}

// Where an in-place recovery's state comes from, for its first log line.
std::string state_source(const recovery_in_progress& recovery) {
  if (!recovery.rollback) return "its state from a surviving replica over the data plane";
  return recovery.why_rollback + ", so every rank rolls back to the newest checkpoint";
}

// The nodes whose processes the recovery starts (or, respawning a worker, the failed worker's).
std::vector<int> recovery_nodes(const recovery_in_progress& recovery) {
  std::vector<int> nodes;
  for (const auto& [index, process] : recovery.replaced) nodes.push_back(index);
  if (nodes.empty()) nodes.push_back(recovery.failed.node_index);
  return nodes;
}

// How long each rank took to be ready, from when the failure was seen: "rank 0 0.08 s, rank 1 0.07
// s" for a few ranks; for more, "1024 ranks: the median 0.42 s, the last, rank 63, 1.99 s".
std::string readiness_text(const std::map<int, double>& ready_after) {
  std::string text;
  if (ready_after.size() <= monitor::numbers_listed_whole) {
    for (const auto& [rank, seconds] : ready_after)
      text += fmt::format("{}rank {} {:.2f} s", text.empty() ? "" : ", ", rank, seconds);
    return text;
  }
  std::vector<double> seconds;
  for (const auto& [rank, after] : ready_after) seconds.push_back(after);
  std::nth_element(seconds.begin(), seconds.begin() + seconds.size() / 2, seconds.end());
  const auto last = std::max_element(ready_after.begin(), ready_after.end(),
                                     [](const auto& a, const auto& b) { return a.second < b.second; });
  return fmt::format("{} ranks: the median {:.2f} s, the last, rank {}, {:.2f} s", ready_after.size(),
                     seconds[seconds.size() / 2], last->first, last->second);
}

// "rank 0 to rank 1, rank 2 to rank 3", the first few of a plan's pairs and how many more.
std::string pairs_text(const recover_plan_msg& plan) {
  monitor::BoundedList pairs(monitor::numbers_listed_whole, ", ");
  for (std::size_t i = 0; i < plan.receivers.size(); ++i)
    pairs.add_described([&] { return fmt::format("rank {} to rank {}", plan.donors[i], plan.receivers[i]); });
  return pairs.text("pairs");
}

}  // namespace

// running ─► recovering (gathering): the recovery's state, its events, its timer.
void begin_recovery(job_actor* self, recovery_in_progress recovery, const std::string& reason) {
  auto& st = self->state;
  recovery.started_unix = unix_now();
  st.recovery = std::move(recovery);
  st.phase = JobPhase::recovering;
  emit(st, recovery_chosen{route_of(*st.recovery), st.recovery->epoch, recovery_nodes(*st.recovery), reason});
  self->delayed_send(self, st.plan.recovery_timeout, recover_atom_v, st.recovery->epoch);
  self->become(recovering(self));
}

// recovering ─► running: the recovery is over, done or given up.
void leave_recovery(job_actor* self) {
  auto& st = self->state;
  st.recovery.reset();
  st.phase = JobPhase::running;
  self->become(running(self));
}

namespace {

// In place ─► restart: the line that says why, then the failed worker's node failed as it would
// have without in-place recovery. `failed` is a copy: it may be the recovery's own, which ends here.
void restart_instead(job_actor* self, const worker_failed_msg failed, const std::string& why) {
  log_restart(self->state, why);
  if (self->state.recovery) leave_recovery(self);
  on_node_done(self, node_done_msg{failed.node_index, 1, failed.reason, true}, true);
}

}  // namespace

// The in-place recovery in progress cannot complete: the job fails as the failure it answered
// would have failed it, blaming the nodes it replaced (or the failed worker's).
void fail_in_place(job_actor* self, std::string reason) {
  const recovery_in_progress recovery = *self->state.recovery;
  leave_recovery(self);
  if (recovery.goal == Goal::grow) {
    // The checkpoint the shell's rejoin committed first is where a restart grows the job from.
    job_outcome_msg outcome{1, "rejoin: growing in place failed (" + reason + "); growing by a restart instead"};
    outcome.rejoin = true;
    return end_job(self, std::move(outcome));
  }
  fail_job(self, recovery.kind, std::move(reason), recovery_nodes(recovery));
}

namespace {

// A worker that throws again before finishing a step since its last in-place recovery would only
// be respawned into the same failure (a bug at one step): "" when that is not so, else why.
// Heartbeats lag, so a rank that did finish a step may still look stuck: then the job restarts,
// the safe side.
std::string repeated_failure(const job_supervisor_state& st, int rank) {
  const auto last = st.respawned.find(rank);
  if (last == st.respawned.end()) return {};
  for (const auto& [index, live] : st.liveness)
    for (const worker_beat& beat : live.workers)
      if (beat.rank == rank && beat.steps_done > last->second.steps) return {};
  return "rank " + std::to_string(rank) + " failed again before finishing a step after step " +
         std::to_string(last->second.steps) + ", where its in-place recovery of epoch " +
         std::to_string(last->second.epoch) + " went on from";
}

// What the launcher does first to silent `nodes`, for the log.
const char* silent_killed(const std::vector<int>& nodes) {
  return nodes.size() == 1 ? " (the silent one killed first)" : " (the silent ones killed first)";
}

}  // namespace

recovery_in_progress replacing_nodes(const job_supervisor_state& st, Goal goal, const std::vector<int>& nodes,
                                     FailureKind kind, const std::string& reason) {
  recovery_in_progress recovery;
  recovery.goal = goal;
  recovery.epoch = st.recovery_epoch + 1;
  recovery.started = Clock::now();
  recovery.failed = worker_failed_msg{nodes.front(), st.plan.nodes.at(nodes.front()).first_rank, reason};
  recovery.kind = kind;
  return recovery;
}

// Starts the processes of `nodes` again for `recovery` (JobPlan::replace_nodes): each becomes the
// job's next attempt, its ranks replacements in the recovery's order. Returns where each went, for
// the log ("node 1's process again on its host h1, ..."), or "" with `why_not` set where none could.
std::string start_again(job_supervisor_state& st, recovery_in_progress& recovery, const std::vector<int>& nodes,
                        FailureKind kind, std::string& why_not) {
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
    st.holding_nothing.insert(index);
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

namespace {

// recovering, before the plan: `nodes` were lost or went silent too. Their processes are started
// again within the same recovery, and the plan waits for their new processes as it waits for the
// first ones. Returns false where it cannot (the plan is made: ranks may already be moving state;
// a grow; or no place for them), the restart's reason logged.
bool widen_in_place(job_actor* self, const std::vector<int>& nodes, FailureKind kind, const std::string& reason) {
  auto& st = self->state;
  auto& recovery = *st.recovery;
  const std::string what = nodes_text(nodes) + (nodes.size() == 1 ? " was " : " were ") +
                           (kind == FailureKind::hang ? "silent" : "lost") + " during the in-place recovery of epoch " +
                           std::to_string(recovery.epoch);
  if (recovery.goal == Goal::grow) {
    log_restart(st, what + ", which was growing the job");
    return false;
  }
  if (recovery.goal == Goal::rejoin_island) {
    log_restart(st, what + ", while lost islands rejoin");
    return false;
  }
  if (recovery.step == Step::restoring || recovery.replacements_started) {
    log_restart(st, what + (recovery.step == Step::restoring ? ", after its plan was made"
                                                             : ", after its new processes started"));
    return false;
  }
  std::string why_not;
  const std::string placed = start_again(st, recovery, nodes, kind, why_not);
  if (placed.empty()) {
    log_restart(st, what + "; " + why_not);
    return false;
  }
  const std::string widened = "in place (epoch " + std::to_string(recovery.epoch) + ") widened to " +
                              nodes_text(nodes) + ": starting " + placed +
                              (kind == FailureKind::hang ? silent_killed(nodes) : "");
  monitor::logger("job")->warn("{}; recovery: {}", reason, widened);
  emit(st, recovery_chosen{route_of(recovery), recovery.epoch, nodes, widened});
  return true;
}

// What an in-place recovery's plan moved over the data plane, by its receivers' reports: the bytes,
// the slowest receiver's seconds, and the donors ("rank 0", "ranks 0 and 2", at 1,024 ranks "ranks 2, 4,
// 6-9, …, 1014 and 1018 (337 in all)").
struct StateMoved {
  std::int64_t bytes = 0;
  double seconds = 0;
  std::set<int> donors;
  std::string donors_text;
};
StateMoved state_moved_by(const recovery_in_progress& recovery) {
  StateMoved moved;
  for (std::size_t i = 0; i < recovery.plan.receivers.size(); ++i) {
    const recover_done_msg& received = recovery.done.at(recovery.plan.receivers[i]);
    moved.bytes += received.bytes;
    moved.seconds = std::max(moved.seconds, received.seconds);
    moved.donors.insert(recovery.plan.donors[i]);
  }
  moved.donors_text = monitor::numbered("rank", {moved.donors.begin(), moved.donors.end()});
  return moved;
}

// Every rank is ready: the plan (recovery_path.hpp's plan_recovery) pairs every rank holding fewer
// steps than the most with a donor of its own pipeline stage and tensor shard; where no replica
// holds some rank's state, every rank rolls back to the newest checkpoint all of them can read
// (plan_rollback), and where there is none the job restarts every node. gathering ─► restoring.
void on_recover_ready(job_actor* self, const recover_ready_msg& ready) {
  auto& st = self->state;
  if (!st.recovery || ready.epoch != st.recovery->epoch || st.recovery->step != Step::gathering) return;
  auto& recovery = *st.recovery;
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
  if (!paired.why_not.empty() && st.plan.recovery.checkpoints && recovery.goal != Goal::grow) {
    recovery.rollback = true;
    recovery.why_rollback = paired.why_not;
    emit(st,
         recovery_chosen{RecoveryRoute::in_place_rollback, recovery.epoch, recovery_nodes(recovery), paired.why_not});
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
  const std::string readiness = readiness_text(recovery.ready_after);
  if (plan.rollback) {
    const std::int64_t lost = recovery.steps_held - plan.steps;
    const std::string chosen = fmt::format(
        "in place by rollback to checkpoint step {} (epoch {}): {}; every rank loads its own shards of it, {} step{} "
        "lost (the most any rank held: {}); every rank was ready ({} after the failure was seen)",
        plan.steps, recovery.epoch, recovery.why_rollback, lost, lost == 1 ? "" : "s", recovery.steps_held, readiness);
    monitor::logger("job")->warn("recovery: {}", chosen);
    emit(st, recovery_chosen{RecoveryRoute::in_place_rollback, recovery.epoch, recovery_nodes(recovery), chosen});
  } else {
    monitor::logger("job")->info(
        "in-place recovery (epoch {}): every rank is ready ({} after the failure was seen); "
        "each goes on after step {}, state given by {}",
        recovery.epoch, readiness, plan.steps, pairs_text(plan));
  }
  recovery.plan = plan;
  recovery.step = Step::restoring;
  for (const auto& [rank, r] : recovery.ready) self->send(r.worker, recover_atom_v, plan);
}

// restoring ─► running, for a grow: every node learns the grown job's start (a worker respawned
// later starts from it), the launcher that the job runs grown, and the log how it went.
void finish_grow(job_actor* self) {
  auto& st = self->state;
  const recovery_in_progress recovery = *st.recovery;
  const StateMoved moved = state_moved_by(recovery);
  std::string joined;
  std::vector<int> nodes;
  for (const auto& [index, process] : recovery.replaced) {
    joined += (joined.empty() ? "" : ", ") + describe(st.joined.at(index));
    nodes.push_back(index);
  }
  const start_msg grown = current_start(st);
  for (const auto& [index, m] : st.joined) self->send(m.node, start_atom_v, grown);
  if (st.plan.grew) st.plan.grew();
  const double seconds = std::chrono::duration<double>(Clock::now() - recovery.started).count();
  monitor::logger("job")->warn(
      "rejoin: grown in place in {:.3f} s (epoch {}): {} joined, every other node kept its process; {} bytes of state "
      "from {} over the data plane in {:.3f} s; every rank goes on after step {} as {} ranks, each of {} "
      "micro-batch(es) of {}",
      seconds, recovery.epoch, joined, moved.bytes, moved.donors_text, moved.seconds, recovery.plan.steps,
      grown.world_size, grown.grad_accum, grown.batch_size);
  st.holding_nothing.clear();
  emit(st, state_moved{RecoveryRoute::grow_in_place,
                       recovery.epoch,
                       moved.bytes,
                       moved.seconds,
                       {moved.donors.begin(), moved.donors.end()},
                       recovery.plan.receivers});
  emit(st, training_resumed{RecoveryRoute::grow_in_place,
                            recovery.epoch,
                            recovery.plan.steps,
                            moved.donors_text + "'s memory",
                            recovery.order.failed_ranks,
                            nodes,
                            {},
                            seconds,
                            FailureKind::node_exit});
  leave_recovery(self);
  st.resumed_at = Clock::now();
}

// Every rank has its state (restoring ─► running): the job runs on, and says how the recovery went.
void on_recover_done(job_actor* self, const recover_done_msg& done) {
  auto& st = self->state;
  if (st.recovery && st.recovery->goal == Goal::rejoin_island) return on_island_rejoined(self, done);
  if (!st.recovery || done.epoch != st.recovery->epoch) return;
  auto& recovery = *st.recovery;
  if (!done.error.empty()) {
    log_restart(st,
                "rank " + std::to_string(done.rank) + " could not take part in the in-place recovery: " + done.error);
    return fail_in_place(self, recovery.failed.reason + "; in-place recovery failed: " + done.error);
  }
  recovery.done[done.rank] = done;
  if (static_cast<int>(recovery.done.size()) < world_size(st.plan)) return;
  if (recovery.goal == Goal::grow) return finish_grow(self);
  const StateMoved moved = state_moved_by(recovery);
  std::int64_t bytes = moved.bytes;
  double transfer = moved.seconds;
  // A rollback moves nothing: every rank read its own shards of the checkpoint.
  if (recovery.plan.rollback)
    for (const auto& [rank, d] : recovery.done) {
      bytes += d.bytes;
      transfer = std::max(transfer, d.seconds);
    }
  const double seconds = std::chrono::duration<double>(Clock::now() - recovery.started).count();
  std::vector<int> respawned_ranks{recovery.failed.rank};
  for (int rank : recovery.order.failed_ranks)
    if (rank != recovery.failed.rank) respawned_ranks.push_back(rank);
  st.respawned[recovery.failed.rank] = {recovery.epoch, recovery.plan.steps};
  st.recovered_kinds.push_back(recovery.kind);
  std::string respawned;
  std::vector<int> nodes, replaced_pids;
  if (recovery.replaced.empty())
    respawned = "rank " + std::to_string(recovery.failed.rank) + " respawned in node " +
                std::to_string(recovery.failed.node_index) + "'s process (pid " +
                std::to_string(st.joined.at(recovery.failed.node_index).pid) + ", kept)";
  for (const auto& [index, process] : recovery.replaced) {
    respawned += (respawned.empty() ? "" : "), ") + ("node " + std::to_string(index) + "'s process started again on ") +
                 st.plan.nodes.at(index).host + " (pid " + std::to_string(st.joined.at(index).pid) + ", was " +
                 std::to_string(process.old_pid);
    nodes.push_back(index);
    replaced_pids.push_back(process.old_pid);
  }
  if (!recovery.replaced.empty()) respawned += "; every other node kept its process)";
  const RecoveryRoute route = route_of(recovery);
  std::string from;
  if (recovery.plan.rollback) {
    from = "checkpoint step " + std::to_string(recovery.plan.steps);
    monitor::logger("job")->warn(
        "recovery: in place done in {:.3f} s (epoch {}): {}; every rank rolled back to checkpoint step {} ({} bytes of "
        "its own shards read by all ranks, the slowest in {:.3f} s); every rank goes on after step {}, {} step{} lost",
        seconds, recovery.epoch, respawned, recovery.plan.steps, bytes, transfer, recovery.plan.steps,
        recovery.steps_held - recovery.plan.steps, recovery.steps_held - recovery.plan.steps == 1 ? "" : "s");
  } else {
    from = moved.donors_text + "'s memory";
    monitor::logger("job")->warn(
        "recovery: in place done in {:.3f} s (epoch {}): {}; {} bytes of state from {} over the data plane in "
        "{:.3f} s; every rank goes on after step {}",
        seconds, recovery.epoch, respawned, bytes, moved.donors_text, transfer, recovery.plan.steps);
  }
  emit(st, state_moved{route,
                       recovery.epoch,
                       bytes,
                       transfer,
                       {moved.donors.begin(), moved.donors.end()},
                       recovery.plan.rollback ? respawned_ranks : recovery.plan.receivers});
  const training_resumed resumed{route,         recovery.epoch, recovery.plan.steps, from, respawned_ranks, nodes,
                                 replaced_pids, seconds,        recovery.kind};
  emit(st, resumed);
  // Every node counts the recovery it went on after (its /metrics).
  for (const auto& [index, m] : st.joined) self->send(m.node, recover_atom_v, resumed);
  st.step_announced = recovery.plan.steps;
  st.holding_nothing.clear();
  leave_recovery(self);
  st.resumed_at = Clock::now();
}

void on_recover_timeout(job_actor* self, int epoch) {
  auto& st = self->state;
  if (!st.recovery || st.recovery->epoch != epoch) return;
  log_restart(st, "the in-place recovery of epoch " + std::to_string(epoch) + " did not complete within " +
                      seconds_text(st.plan.recovery_timeout));
  fail_in_place(self, st.recovery->failed.reason);
}

// A process the launcher started again in place exited (`pid`). Where that is the awaited
// replacement, the recovery fails: a node that cannot come back. The process whose loss began
// this recovery may itself have been started again by an earlier one: its own exit, seen by the
// launcher after the job saw the loss, is expected.
void on_replacement_exit(job_actor* self, int node_index, int pid, const std::string& exit) {
  auto& st = self->state;
  if (!awaited_replacement(st, node_index) || pid == st.recovery->replaced.at(node_index).old_pid) return;
  log_restart(st, "node " + std::to_string(node_index) + "'s new process " + exit + " before it joined");
  fail_in_place(self, st.recovery->failed.reason + "; node " + std::to_string(node_index) + "'s new process " + exit +
                          " before it joined");
}

}  // namespace

void on_worker_failed(job_actor* self, const worker_failed_msg& failed) {
  auto& st = self->state;
  auto node = st.joined.find(failed.node_index);
  if (node == st.joined.end() || from_replaced_process(self)) return;
  emit(st, failure_detected{FailureKind::worker_exception,
                            {failed.node_index},
                            {failed.rank},
                            "rank " + std::to_string(failed.rank) + " (" + describe(st, node->second) +
                                ") failed: " + failed.reason});
  const RecoveryChoice choice = choose_recovery(st.plan.recovery, FailureKind::worker_exception);
  if (!choice.in_place) return restart_instead(self, failed, choice.why_not);
  if (st.recovery)
    return restart_instead(self, failed,
                           "rank " + std::to_string(failed.rank) + " failed during the in-place recovery of epoch " +
                               std::to_string(st.recovery->epoch));
  if (!st.pending_failure.empty() || !st.lost.empty() || !st.done.empty())
    return restart_instead(self, failed, "another node failed, was lost or finished at the same time");
  if (const std::string repeat = repeated_failure(st, failed.rank); !repeat.empty())
    return restart_instead(self, failed, repeat);
  if (choice.island_left_out) {
    // No replica holds a DiLoCo island's weights: its node's process, worker and all, is started
    // again and the island left out as a lost node's is (island_coordinator.hpp).
    const std::string reason =
        "rank " + std::to_string(failed.rank) + " (" + describe(st, node->second) + ") failed: " + failed.reason;
    if (!leave_islands_out(self, {failed.node_index}, FailureKind::worker_exception, reason))
      on_node_done(self, node_done_msg{failed.node_index, 1, failed.reason, true}, true);
    return;
  }
  recovery_in_progress recovery;
  recovery.goal = Goal::respawn_worker;
  recovery.epoch = ++st.recovery_epoch;
  recovery.started = Clock::now();
  recovery.failed = failed;
  recovery.rollback = choice.rollback;
  if (choice.rollback) recovery.why_rollback = no_replica_reason(st.plan.recovery, failed.rank);
  recovery.order = {recovery.epoch,
                    {failed.rank},
                    "rank " + std::to_string(failed.rank) + " failed",
                    caf::actor_cast<caf::actor>(self),
                    failed.steps_done};
  const std::string chosen = "in place (epoch " + std::to_string(recovery.epoch) +
                             "): respawning its worker in its process, " + state_source(recovery);
  monitor::logger("job")->warn("rank {} ({}) failed: {}; recovery: {}", failed.rank, describe(st, node->second),
                               failed.reason, chosen);
  for (const auto& [index, m] : st.joined) self->send(m.node, recover_atom_v, recovery.order);
  begin_recovery(self, std::move(recovery), chosen);
}

bool replace_in_place(job_actor* self, const std::vector<int>& nodes, FailureKind kind, const std::string& reason) {
  auto& st = self->state;
  if (end_if_completed(self, kind, reason, nodes)) return true;
  const RecoveryChoice choice = choose_recovery(st.plan.recovery, kind);
  TROUPE_CHECK(!choice.in_place || st.plan.replace_nodes, "recovery.replaces_nodes set without JobPlan::replace_nodes");
  const auto is_replaced = [&](int index) { return std::find(nodes.begin(), nodes.end(), index) != nodes.end(); };
  if (choice.in_place && st.recovery) return widen_in_place(self, nodes, kind, reason);
  std::string why_not = choice.why_not;
  if (choice.in_place && st.paused)
    why_not =
        "the shell has the job paused: its workers wait at their step boundary, where a rescue order reaches them";
  else if (choice.in_place && (!st.pending_failure.empty() || !st.done.empty() ||
                               std::any_of(st.lost.begin(), st.lost.end(), [&](int i) { return !is_replaced(i); })))
    why_not = "another node failed, was lost or finished at the same time";
  if (!why_not.empty()) {
    log_restart(st, why_not);
    return false;
  }
  if (choice.island_left_out) return leave_islands_out(self, nodes, kind, reason);
  recovery_in_progress recovery = replacing_nodes(st, Goal::replace_nodes, nodes, kind, reason);
  recovery.order = {
      recovery.epoch, {}, nodes_text(nodes) + " " + std::string(to_string(kind)), caf::actor_cast<caf::actor>(self)};
  const std::string placed = start_again(st, recovery, nodes, kind, why_not);
  if (placed.empty()) {
    log_restart(st, why_not);
    return false;
  }
  ++st.recovery_epoch;
  recovery.rollback = choice.rollback;
  if (choice.rollback) recovery.why_rollback = no_replica_reason(st.plan.recovery, recovery.failed.rank);
  const std::string chosen = "in place (epoch " + std::to_string(recovery.epoch) + "): starting " + placed +
                             (kind == FailureKind::hang ? silent_killed(nodes) : "") +
                             ", every other node keeps its process; " + state_source(recovery);
  monitor::logger("job")->warn("{}; recovery: {}", reason, chosen);
  for (const auto& [index, m] : st.joined)
    if (!is_replaced(index)) self->send(m.node, recover_atom_v, recovery.order);
  begin_recovery(self, std::move(recovery), chosen);
  return true;
}

GrowAnswer grow_in_place(job_actor* self) {
  auto& st = self->state;
  // Another grow or an in-place recovery under way: this rejoin has nothing to add, and nothing
  // restarts for it.
  if (st.phase == JobPhase::recovering) {
    const std::string why =
        (st.recovery->goal == Goal::grow ? "the grow in place of epoch " : "the in-place recovery of epoch ") +
        std::to_string(st.recovery->epoch) + " is under way";
    monitor::logger("job")->warn("rejoin: refused: {}; the job goes on", why);
    return {GrowAnswer::Route::refused, why};
  }
  std::string why_not =
      st.plan.grow_nodes ? choose_grow(st.plan.recovery).why_not : "the nodes were started elsewhere (--external)";
  if (why_not.empty() && st.phase != JobPhase::running) why_not = "the job is not running";
  if (why_not.empty() && st.paused) why_not = "the shell has the job paused";
  if (why_not.empty() && (!st.pending_failure.empty() || !st.lost.empty() || !st.done.empty()))
    why_not = "a node failed, was lost or finished";
  if (!why_not.empty()) {
    monitor::logger("job")->warn("rejoin: growing by restarting every node: {}", why_not);
    emit(st, recovery_chosen{RecoveryRoute::grow_by_restart, 0, {}, "growing by restarting every node: " + why_not});
    return {GrowAnswer::Route::by_restart, {}};
  }
  const GrownNodes grown = st.plan.grow_nodes(st.attempt + 1);
  if (!grown.why_not.empty()) {
    // No node is left out (any more): the job runs on as it is.
    monitor::logger("job")->warn("rejoin: refused: {}; the job goes on", grown.why_not);
    return {GrowAnswer::Route::refused, grown.why_not};
  }
  TROUPE_CHECK(!grown.nodes.empty(), "grow_nodes started no node and gave no reason");
  ++st.attempt;
  const int before = world_size(st.plan);
  int after = before;
  for (const PlannedNode& node : grown.nodes) after += node.slots;
  const std::string reason = "the job grows from " + std::to_string(before) + " to " + std::to_string(after) + " ranks";
  recovery_in_progress recovery;
  recovery.goal = Goal::grow;
  recovery.epoch = ++st.recovery_epoch;
  recovery.started = Clock::now();
  recovery.failed = worker_failed_msg{grown.nodes.front().node_index, grown.nodes.front().first_rank, reason};
  std::vector<int> indices;
  for (const PlannedNode& node : grown.nodes) {
    TROUPE_CHECK(node.node_index == static_cast<int>(st.plan.nodes.size()) && node.first_rank == world_size(st.plan),
                 "grow_nodes numbers its nodes and ranks after the job's");
    st.plan.nodes.push_back(node);
    st.node_attempts[node.node_index] = st.attempt;
    recovery.replaced[node.node_index] = {0, false};
    st.holding_nothing.insert(node.node_index);
    indices.push_back(node.node_index);
    for (int rank = node.first_rank; rank < node.first_rank + node.slots; ++rank)
      recovery.order.failed_ranks.push_back(rank);
  }
  TROUPE_CHECK(after == world_size(st.plan), "the grown plan counts every new rank");
  const int stage_ranks = st.plan.pipeline_stages * st.plan.tensor_shards;
  const int replicas_before = st.plan.recovery.data_parallel;
  st.plan.config_hash = grown.config_hash;
  st.plan.recovery.data_parallel = after / stage_ranks;
  st.batch_size = grown.batch_size;
  st.grad_accum = grown.grad_accum;
  st.replica_speeds = grown.replica_speeds;
  recovery.order.epoch = recovery.epoch;
  recovery.order.reason = reason;
  recovery.order.job = caf::actor_cast<caf::actor>(self);
  recovery.order.grown_world = after;
  recovery.order.grown_batch_size = grown.batch_size;
  recovery.order.grown_grad_accum = grown.grad_accum;
  recovery.order.grown_speeds = grown.replica_speeds;
  const std::string growing = fmt::format(
      "growing in place (epoch {}) from {} to {} ranks: starting {}, every running node keeps its process; each "
      "replica then sums {} micro-batch(es) of {}",
      recovery.epoch, before, after, nodes_text(indices), grown.grad_accum, grown.batch_size);
  monitor::logger("job")->warn("rejoin: {}", growing);
  emit(st, layout_changed{RecoveryRoute::grow_in_place, indices, replicas_before, after / stage_ranks, grown.batch_size,
                          grown.grad_accum, "train.grad_accum"});
  for (const auto& [index, m] : st.joined) self->send(m.node, recover_atom_v, recovery.order);
  begin_recovery(self, std::move(recovery), growing);
  return {GrowAnswer::Route::grown, {}};
}

bool awaited_replacement(const job_supervisor_state& st, int node_index) {
  if (!st.recovery) return false;
  const auto replaced = st.recovery->replaced.find(node_index);
  return replaced != st.recovery->replaced.end() && !replaced->second.joined;
}

void join_replacement(job_actor* self, const join_msg& m) {
  auto& st = self->state;
  auto& recovery = *st.recovery;
  auto& replaced = recovery.replaced.at(m.node_index);
  const bool grow = recovery.goal == Goal::grow;
  if (grow)
    monitor::logger("job")->info("{} joined the running job", describe(m));
  else
    monitor::logger("job")->info("{} joined in place of pid {}", describe(m), replaced.old_pid);
  emit(st, node_joined{m.node_index, st.plan.nodes.at(m.node_index).host, m.pid, replaced.old_pid, grow});
  self->monitor(m.node);
  st.joined[m.node_index] = m;
  replaced.joined = true;
  st.liveness[m.node_index] = fresh_liveness(st.plan.nodes.at(m.node_index), Clock::now());
  if (!std::all_of(recovery.replaced.begin(), recovery.replaced.end(), [](const auto& r) { return r.second.joined; }))
    return;
  const start_msg start = current_start(st);
  recovery.replacements_started = true;
  for (const auto& [index, process] : recovery.replaced)
    self->send(st.joined.at(index).node, start_atom_v, start, recovery.order);
  if (recovery.goal == Goal::rejoin_island) rejoin_islands(self);
}

caf::behavior recovering(job_actor* self) {
  const caf::message_handler phase{
      [=](recover_atom, const worker_failed_msg& failed) { on_worker_failed(self, failed); },
      [=](recover_atom, const recover_ready_msg& ready) { on_recover_ready(self, ready); },
      [=](recover_atom, const recover_done_msg& done) { on_recover_done(self, done); },
      [=](recover_atom, const islands_applied_msg& report) { on_islands_applied(self, report); },
      [=](recover_atom, int epoch) { on_recover_timeout(self, epoch); },
      [=](recover_atom, int node_index, int pid, const std::string& exit) {
        on_replacement_exit(self, node_index, pid, exit);
      },
  };
  return phase.or_else(running_handlers(self)).or_else(every_phase(self));
}

}  // namespace troupe::actors::supervision
