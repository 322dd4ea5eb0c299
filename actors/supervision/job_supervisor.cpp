#include "actors/supervision/job_supervisor.hpp"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "actors/supervision/job_supervisor_state.hpp"
#include "actors/supervision/recovery_coordinator.hpp"
#include "actors/supervision/recovery_path.hpp"
#include "monitor/log.hpp"

namespace troupe::actors::supervision {
namespace {

constexpr auto failure_settle_time = std::chrono::milliseconds(500);

// How often the watchdog looks: a quarter of the tightest limit, within [50 ms, 1 s].
std::chrono::milliseconds watchdog_period(const JobPlan& plan) {
  auto tightest = plan.heartbeat_timeout;
  if (plan.step_timeout.count() > 0) tightest = std::min(tightest, plan.step_timeout);
  return std::clamp(tightest / 4, std::chrono::milliseconds(50), std::chrono::milliseconds(1000));
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
    // A lost node's process started again in place has no heartbeat yet: its own count is unknown.
    auto live = st.liveness.find(planned.node_index);
    if (live == st.liveness.end()) {
      every_rank_counted = false;
      continue;
    }
    for (const worker_beat& worker : live->second.workers)
      if (worker.steps_done < st.plan.last_step) every_rank_counted = false;
  }
  return every_rank_counted || others_succeeded;
}

caf::behavior rescuing(job_actor* self);

// The steps `rank` held at its node's last heartbeat; -1 where none told.
std::int64_t steps_held(const job_supervisor_state& st, int node_index, int rank) {
  const auto live = st.liveness.find(node_index);
  if (live == st.liveness.end()) return -1;
  for (const worker_beat& worker : live->second.workers)
    if (worker.rank == rank) return worker.steps_done;
  return -1;
}

// running ─► rescuing: a rescue_msg to every surviving node naming, for every (stage, shard, place
// in the expert group), the surviving rank that holds the most steps as its writer (the lowest
// replica of those); a process an in-place recovery started, which holds no state yet, writes
// nothing. Under expert shards the replicas at one place of their expert groups hold the same
// experts, so one of each place writes: together they hold every expert once (and each the dense
// parameters, which a checkpoint's loader reads from the first). Returns false where some place
// has no such survivor: the job ends at once, saying so.
bool start_rescue(job_actor* self, job_outcome_msg failure) {
  auto& st = self->state;
  auto survives = [&](int node_index) {
    return st.joined.count(node_index) && !st.lost.count(node_index) && !st.done.count(node_index) &&
           !st.holding_nothing.count(node_index) &&
           std::find(failure.failed_nodes.begin(), failure.failed_nodes.end(), node_index) ==
               failure.failed_nodes.end();
  };
  const comm::Grid grid = job_grid(st.plan);
  const int expert_places = std::max(1, st.plan.recovery.expert_shards);
  std::map<int, int> writers;
  for (int stage = 0; stage < grid.pp; ++stage) {
    for (int shard = 0; shard < grid.tp; ++shard) {
      for (int experts = 0; experts < expert_places; ++experts) {
        int writer = -1, writer_node = -1;
        std::int64_t most = -1;
        for (int replica = experts; replica < grid.dp; replica += expert_places) {
          const int rank = comm::grid_rank(grid, {replica, stage, shard});
          for (const PlannedNode& n : st.plan.nodes)
            if (rank >= n.first_rank && rank < n.first_rank + n.slots && survives(n.node_index) &&
                (writer < 0 || steps_held(st, n.node_index, rank) > most)) {
              writer = rank;
              writer_node = n.node_index;
              most = steps_held(st, n.node_index, rank);
            }
        }
        if (writer >= 0) {
          writers[writer] = writer_node;
          continue;
        }
        st.failure = std::move(failure);
        std::vector<std::string> parts;
        if (grid.pp > 1) parts.push_back("pipeline stage " + std::to_string(stage));
        if (grid.tp > 1) parts.push_back("tensor shard " + std::to_string(shard));
        if (expert_places > 1) parts.push_back("expert shard " + std::to_string(experts));
        std::string part;
        for (const std::string& p : parts) part += (part.empty() ? " of " : ", ") + p;
        end_rescue(self, "no surviving replica" + part);
        return false;
      }
    }
  }
  st.phase = JobPhase::rescuing;
  st.failure = std::move(failure);
  st.rescue_writers = std::move(writers);
  rescue_msg order{{}, st.failure.reason, self};
  std::string ranks;
  for (const auto& [rank, node] : st.rescue_writers) {
    order.writers.push_back(rank);
    ranks += (ranks.empty() ? "" : ", ") + std::to_string(rank);
  }
  const std::string asking = "asking rank(s) " + ranks + " for a rescue snapshot of their memory";
  monitor::logger("job")->warn("{} ({}); {}", st.failure.reason, to_string(st.failure.failure_kind), asking);
  std::vector<int> writer_nodes;
  for (const auto& [rank, node] : st.rescue_writers) writer_nodes.push_back(node);
  emit(st, recovery_chosen{RecoveryRoute::rescue, 0, writer_nodes, asking});
  for (const auto& [index, m] : st.joined)
    if (survives(index)) self->send(m.node, rescue_atom_v, order);
  self->delayed_send(self, st.plan.rescue_timeout, rescue_atom_v);
  self->become(rescuing(self));
  return true;
}

// The rescue's failure, once every rank turns out to have finished its last step (the survivors'
// reports and heartbeats may come after the loss): no snapshot is needed.
void end_if_completed_while_rescuing(job_actor* self) {
  auto& st = self->state;
  end_if_completed(self, st.failure.failure_kind, st.failure.reason, st.failure.failed_nodes);
}

// A writer's node failed or was lost before its snapshot was reported: the rescue cannot finish.
void check_rescue_writers(job_actor* self, int node_index, const std::string& what) {
  auto& st = self->state;
  for (const auto& [rank, node] : st.rescue_writers)
    if (node == node_index && !st.rescued.count(rank))
      return end_rescue(self, "rank " + std::to_string(rank) + "'s node " + what);
}

// joining ─► running: every planned node joined.
void start_job(job_actor* self) {
  auto& st = self->state;
  st.phase = JobPhase::running;
  const start_msg start = current_start(st);
  monitor::logger("job")->info("all {} nodes joined; starting {} ranks", st.plan.nodes.size(), start.world_size);
  emit(st, job_started{static_cast<int>(st.plan.nodes.size()), start.world_size});
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
  job_view_msg view{st.started(), {}};
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

// What one rank's heartbeat brings for the job's events: every step it finished since its last
// heartbeat that no rank announced yet (at the step's own end time), and what it noted of its
// checkpoints and its resume (each once: every rank resumes and skips alike).
void announce(job_supervisor_state& st, const worker_beat& beat) {
  double& taken = st.step_records_taken[beat.rank];
  for (const step_beat& step : beat.recent_steps) {
    if (step.start_unix_seconds <= taken) continue;
    taken = step.start_unix_seconds;
    if (step.step <= st.step_announced) continue;
    st.step_announced = step.step;
    emit(st, step_trained{step.step, step.loss}, step.start_unix_seconds + step.seconds);
  }
  for (const worker_notice& notice : beat.notices) {
    switch (notice.kind) {
      case monitor::NoticeKind::resumed:
        if (std::exchange(st.resume_announced, true)) break;
        emit(
            st,
            training_resumed{st.plan.start_route, 0, notice.step, notice.detail, {}, {}, {}, 0, FailureKind::node_exit},
            notice.unix_seconds);
        break;
      case monitor::NoticeKind::checkpoint_committed:
        emit(st, checkpoint_noted{CheckpointOutcome::committed, beat.rank, notice.step, notice.detail},
             notice.unix_seconds);
        break;
      case monitor::NoticeKind::checkpoint_failed:
        emit(st, checkpoint_noted{CheckpointOutcome::failed, beat.rank, notice.step, notice.detail},
             notice.unix_seconds);
        break;
      case monitor::NoticeKind::checkpoint_skipped:
        if (!st.skips_announced.insert(notice.step).second) break;
        emit(st, checkpoint_noted{CheckpointOutcome::skipped, beat.rank, notice.step, notice.detail},
             notice.unix_seconds);
        break;
    }
  }
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

// The failure a node process's loss, silence or unreachability is: its event, then in place where
// that applies (while running or recovering), else the job's failure.
void on_node_process_gone(job_actor* self, const std::vector<int>& nodes, FailureKind kind, std::string reason) {
  auto& st = self->state;
  std::vector<int> ranks;
  for (int index : nodes)
    for (int slot = 0; slot < st.plan.nodes.at(index).slots; ++slot)
      ranks.push_back(st.plan.nodes.at(index).first_rank + slot);
  emit(st, failure_detected{kind, nodes, ranks, reason});
  if ((st.phase == JobPhase::running || st.phase == JobPhase::recovering) &&
      replace_in_place(self, nodes, kind, reason))
    return;
  fail_job(self, kind, std::move(reason), nodes);
}

// A node supervisor went away. A down_msg is no behaviour's message in CAF 0.17 (it goes to the
// one down handler), so the phase decides here: joining, running and recovering fail the job (at
// once while joining); rescuing checks whether a writer was lost.
void on_node_down(job_actor* self, const caf::down_msg& down) {
  auto& st = self->state;
  // The old process of a node started again in place: its end is the recovery's doing.
  if (st.replaced_processes.count(down.source)) return;
  const join_msg* m = lost_node(st, down);
  if (!m) return;
  if (st.phase == JobPhase::rescuing) return check_rescue_writers(self, m->node_index, "was lost");
  std::string reason = "lost " + describe(st, *m) + ": " + to_string(down.reason);
  if (!st.pending_failure.empty()) reason += "; " + st.pending_failure;
  on_node_process_gone(self, {m->node_index}, FailureKind::node_lost, std::move(reason));
}

// The job's port saw the connection from `address` time out at the TCP level (the frame guard's
// keepalive, actors/control/frame_guard.hpp): every running node that joined from there is
// unreachable. A connection from anywhere else (a shell) is no node's.
void on_unreachable(job_actor* self, const std::string& address, double seconds) {
  auto& st = self->state;
  std::vector<int> nodes;
  std::string names;
  BoundedList last_known(described_ranks);
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
      last_known.add_described([&] { return describe_activity(st, index, beat, now); });
  }
  if (nodes.empty()) return;
  char waited[32];
  std::snprintf(waited, sizeof waited, "%.1f s", seconds);
  std::string reason = names + " unreachable: its host " + address +
                       " answered no TCP acknowledgement or keepalive for " + waited +
                       " (a cut link or a host gone, not a process that exited or hung); last known " +
                       (last_known.empty() ? std::string("nothing") : last_known.text("ranks"));
  // Every node of that host goes to a spare line of its own, in one in-place recovery.
  on_node_process_gone(self, nodes, FailureKind::unreachable, std::move(reason));
}

// The failure a node reported, once settled. Nodes that reported a failure are not survivors;
// the job's own done set says so.
void on_settled(job_actor* self) {
  auto& st = self->state;
  std::string reason = st.pending_failure;
  // The comm library's errors start "comm: " (comm/engine.cpp); a node relays its rank's error.
  if (reason.find("comm: ") != std::string::npos) reason += likely_cause_of_comm_failure(st, Clock::now());
  if (!std::exchange(st.pending_failure_reported, true))
    emit(st, failure_detected{FailureKind::worker_exception, st.pending_failed_nodes, {}, reason});
  fail_job(self, FailureKind::worker_exception, std::move(reason), st.pending_failed_nodes);
}

caf::behavior joining(job_actor* self) {
  const caf::message_handler phase{
      [=](done_atom, const node_done_msg& d) { on_node_done(self, d); },
      [=](settle_atom) { on_settled(self); },
      [=](timeout_atom) {
        auto& st = self->state;
        BoundedList missing(monitor::numbers_listed_whole, ", ");
        std::vector<int> missing_nodes;
        for (const auto& planned : st.plan.nodes)
          if (!st.joined.count(planned.node_index)) {
            missing.add_described([&] { return std::to_string(planned.node_index) + " (" + planned.host + ")"; });
            missing_nodes.push_back(planned.node_index);
          }
        const std::string reason = (missing_nodes.size() == 1 ? "node " : "nodes ") + missing.text("nodes") +
                                   " did not join within " +
                                   std::to_string(st.plan.join_timeout.count() / 1000.0).substr(0, 5) + " s";
        emit(st, failure_detected{FailureKind::join_timeout, missing_nodes, {}, reason});
        end_job(self, failure_outcome(2, FailureKind::join_timeout, reason, missing_nodes));
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
          if (step != st.rescued.begin()->second) return end_rescue(self, "the writers' last completed steps differ");
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

void emit(job_supervisor_state& st, job_event_body body, double unix_seconds) {
  if (st.plan.events) st.plan.events->emit(st.attempt, std::move(body), unix_seconds);
}

std::string stale_attempt(const job_supervisor_state& st, int node_index, int attempt) {
  const int current = st.node_attempts.at(node_index);
  if (attempt >= current) return {};
  return "attempt " + std::to_string(attempt) + " is stale, the job is at attempt " + std::to_string(current);
}

// Such a process is cut off from the job and its word counts for nothing. The first of its
// messages is logged, "refused node 1 (h1, pid N): attempt 0 is stale, …".
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

void log_restart(job_supervisor_state& st, const std::string& why) {
  if (std::exchange(st.restart_logged, true)) return;
  monitor::logger("job")->warn("recovery: restarting every node: {}", why);
  emit(st, recovery_chosen{RecoveryRoute::restart, 0, {}, "restarting every node: " + why});
}

job_outcome_msg failure_outcome(int exit_code, FailureKind kind, std::string reason, std::vector<int> nodes,
                                std::vector<int> drop) {
  return {exit_code, std::move(reason), kind, std::move(nodes), -1, std::move(drop)};
}

void end_job(job_actor* self, job_outcome_msg outcome) {
  auto& st = self->state;
  if (st.phase == JobPhase::ended) return;
  st.phase = JobPhase::ended;
  auto log = monitor::logger("job");
  if (outcome.exit_code == 0)
    log->info("job finished: {}", outcome.reason);
  else if (outcome.rejoin)
    log->info("attempt ended: {}", outcome.reason);
  else
    log->error("job failed: {}", outcome.reason);
  for (auto& [index, m] : st.joined) self->send(m.node, stop_atom_v, stop_msg{outcome.exit_code, outcome.reason});
  // A process an in-place recovery started that has not joined hears no stop from here.
  if (outcome.exit_code == 0 && st.recovery && st.plan.stop_nodes)
    for (const auto& [index, process] : st.recovery->replaced)
      if (!process.joined) st.plan.stop_nodes(outcome.reason);
  self->send(st.listener, done_atom_v, std::move(outcome));
  self->quit();
}

// A node lost or silent after every rank finished its last step takes nothing from the job: it
// ends as finished, without a rescue nobody would write or a restart that would train nothing.
bool end_if_completed(job_actor* self, FailureKind kind, const std::string& reason, const std::vector<int>& gone) {
  auto& st = self->state;
  if (!node_process_gone(kind) || !training_completed(st, gone)) return false;
  end_job(self, 0,
          "every rank finished its last step (" + std::to_string(st.plan.last_step) + "); " + reason +
              ", after training completed");
  return true;
}

// joining or running: the job ends, after a rescue snapshot when one can be had (see the header).
void fail_job(job_actor* self, FailureKind kind, std::string reason, std::vector<int> nodes) {
  auto& st = self->state;
  std::string cut;  // the in-place recovery this failure cut short, if any
  if (st.phase == JobPhase::recovering) {
    // The recovery in progress cannot answer this failure: it is given up with the job's attempt.
    cut = "the in-place recovery of epoch " + std::to_string(st.recovery ? st.recovery->epoch : 0) +
          " did not complete: " + reason;
    st.recovery.reset();
    st.phase = JobPhase::running;
  }
  if (st.phase != JobPhase::joining && st.phase != JobPhase::running) return;
  if (end_if_completed(self, kind, reason, nodes)) return;
  if (st.phase == JobPhase::running) {
    const RecoveryChoice choice = choose_recovery(st.plan.recovery, kind);
    log_restart(st, !cut.empty()      ? cut
                    : choice.in_place ? "the in-place recovery of this failure did not complete"
                                      : choice.why_not);
  }
  job_outcome_msg failure = failure_outcome(1, kind, std::move(reason), std::move(nodes));
  const bool blames_a_node = kind != FailureKind::stall && !failure.failed_nodes.empty();
  if (st.plan.rescue_timeout.count() <= 0 || st.phase != JobPhase::running || !blames_a_node)
    return end_job(self, std::move(failure));
  start_rescue(self, std::move(failure));
}

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
  start.replica_speeds = st.replica_speeds;
  start.recovery = st.plan.recovery;
  return start;
}

node_liveness fresh_liveness(const PlannedNode& planned, Clock::time_point now) {
  node_liveness live{now, {}};
  for (int slot = 0; slot < planned.slots; ++slot)
    live.workers.push_back({planned.first_rank + slot, 0, 0, 0, {}, {}, 0});
  return live;
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
          if (own_node && (m.build_id != st.plan.build_id || m.config_hash != st.plan.config_hash)) {
            const std::string reason = describe(m) + " cannot join: " + refusal;
            emit(st, failure_detected{FailureKind::rejected, {m.node_index}, {}, reason});
            end_job(self, failure_outcome(2, FailureKind::rejected, reason, {m.node_index}));
          }
          return {false, refusal};
        }
        if (awaited_replacement(st, m.node_index)) {
          join_replacement(self, m);
          return {true, {}};
        }
        monitor::logger("job")->info("{} joined", describe(m));
        emit(st, node_joined{m.node_index, st.plan.nodes.at(m.node_index).host, m.pid, 0, false});
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
        for (const worker_beat& w : beat.workers) {
          if (!w.activity.empty()) st.stragglers.sample(w.rank, !w.waiting_for.empty());
          announce(st, w);
        }
        if (st.phase == JobPhase::rescuing) end_if_completed_while_rescuing(self);
      },
      [=](view_atom) { return job_view(self->state); },
      [=](pause_atom, bool paused) {
        auto& st = self->state;
        if (st.paused && !paused) st.resumed_at = Clock::now();
        st.paused = paused;
      },
      [=](stop_atom, const std::string& why) {
        // The launcher stops every node at a signal: their exits are its doing, not failures to
        // recover from.
        end_job(self, failure_outcome(1, FailureKind::node_exit, why, {}));
      },
      [=](drain_atom, int node) {
        // The shell's `drain node N`, after its checkpoint committed: this attempt ends so that
        // launch restarts the job without that node.
        const std::string reason = "drain node " + std::to_string(node) + ": the shell asked to go on without it";
        end_job(self, failure_outcome(1, FailureKind::drained, reason, {node}, {node}));
      },
      [=](rejoin_atom) -> std::string {
        // The shell's `rejoin`, after its checkpoint committed: the nodes an earlier attempt left
        // out join the running job, or this attempt ends so that launch restarts the job with them.
        // The answer is why it was refused, empty where the job grows.
        GrowAnswer answer = grow_in_place(self);
        if (answer.route == GrowAnswer::Route::by_restart) {
          job_outcome_msg outcome{1, "rejoin: the shell asked for the nodes the job went on without back"};
          outcome.rejoin = true;
          end_job(self, std::move(outcome));
        }
        return std::move(answer.refusal);
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
      [=](recover_atom, const islands_applied_msg&) {},
      [=](recover_atom, int) {},
      [=](recover_atom, int, int, const std::string&) {},
  };
}

void on_node_done(job_actor* self, const node_done_msg& d, bool reported) {
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
    st.pending_failure_reported = st.pending_failure_reported || reported;
  } else {
    st.succeeded.insert(d.node_index);
    if (st.done.size() == st.plan.nodes.size() && st.pending_failure.empty())
      return end_job(self, 0, "all " + std::to_string(st.done.size()) + " nodes done");
    // Lost nodes started again in place, whose peers all finished their last step: nothing is left
    // to recover, and the job ends as the restart path would, without waiting for the recovery.
    if (st.recovery && st.recovery->goal == recovery_in_progress::Goal::replace_nodes) {
      std::vector<int> gone;
      for (const auto& [index, process] : st.recovery->replaced) gone.push_back(index);
      end_if_completed(self, st.recovery->kind, st.recovery->failed.reason, gone);
    }
  }
}

caf::message_handler running_handlers(job_actor* self) {
  return {
      [=](done_atom, const node_done_msg& d) { on_node_done(self, d); },
      [=](settle_atom) { on_settled(self); },
      [=](unreachable_atom, const std::string& address, double seconds) { on_unreachable(self, address, seconds); },
      [=](recover_atom, const worker_failed_msg& failed) { on_worker_failed(self, failed); },
      [=](watchdog_atom) {
        auto& st = self->state;
        std::vector<int> silent_nodes;
        if (std::string verdict = watchdog_verdict(st, Clock::now(), silent_nodes); !verdict.empty()) {
          if (silent_nodes.empty()) {
            emit(st, failure_detected{FailureKind::stall, {}, {}, verdict});
            return fail_job(self, FailureKind::stall, verdict, {});
          }
          on_node_process_gone(self, silent_nodes, FailureKind::hang, verdict);
          if (st.phase != JobPhase::running && st.phase != JobPhase::recovering) return;
        }
        report_straggler(st);
        self->delayed_send(self, watchdog_period(st.plan), watchdog_atom_v);
      },
  };
}

caf::behavior running(job_actor* self) { return running_handlers(self).or_else(every_phase(self)); }

}  // namespace troupe::actors::supervision

namespace troupe::actors {

caf::actor spawn_job_supervisor(caf::actor_system& system, JobPlan plan, caf::actor listener) {
  return system.spawn(supervision::job_supervisor, std::move(plan), std::move(listener));
}

}  // namespace troupe::actors
