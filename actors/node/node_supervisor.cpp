#include "actors/node/node_supervisor.hpp"

#include <algorithm>
#include <optional>
#include <set>

#include "actors/process_metrics.hpp"
#include "actors/worker/mailbox_comm.hpp"
#include "compute/memory_ledger.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {
namespace {

// The node supervisor's phases (the header's diagram); joining and working are behaviours.
enum class NodePhase { joining, working, ended };

struct node_supervisor_state {
  caf::actor job;
  caf::actor listener;
  std::vector<caf::actor> workers;  // by slot
  std::vector<std::shared_ptr<monitor::WorkProgress>> progress;
  int node_index = -1;
  int slots = 0;
  int first_rank = 0;  // slot 0's rank, from the start message
  int workers_done = 0;
  bool failure_reported = false;
  // After a rescue order the workers stop one by one, the writers once they have written: the
  // first stop waits here until every worker is done, so no writer's answer comes after it.
  bool rescue_ordered = false;
  std::optional<node_done_msg> held_failure;
  // For respawning a worker in place: what the workers run and the job's start message, and the
  // slots whose worker threw and was reported to the job as worker_failed_msg.
  NodeWork work;
  start_msg start;
  std::set<int> awaiting_word;
  NodePhase phase = NodePhase::joining;
  static inline const char* name = "node_supervisor";
};

using node_actor = caf::stateful_actor<node_supervisor_state>;

void end_node(node_actor* self, int exit_code, const std::string& reason) {
  auto& st = self->state;
  if (st.phase == NodePhase::ended) return;
  st.phase = NodePhase::ended;
  for (const caf::actor& worker : st.workers) self->send(worker, stop_atom_v, stop_msg{exit_code, reason});
  self->send(st.listener, done_atom_v, job_outcome_msg{exit_code, reason});
  self->quit();
}

// Runs `work` and sends its outcome, with the slot, to `supervisor`; a stop request ends it at its
// next wait.
void run_worker(caf::blocking_actor* self, caf::actor supervisor, NodeWork work, start_msg start, int slot,
                std::shared_ptr<monitor::WorkProgress> progress, std::optional<recover_msg> replacing) {
  node_done_msg done;
  try {
    done = work(start, slot, self, *progress, replacing);
  } catch (const WorkStopped& stopped) {
    done = {-1, 1, std::string("stopped: ") + stopped.what()};
  }
  self->send(supervisor, done_atom_v, done, slot);
}

// What a worker noted since it was last asked, as the heartbeat carries it.
std::vector<worker_notice> notices(monitor::WorkProgress& progress) {
  std::vector<worker_notice> taken;
  for (monitor::WorkNotice& n : progress.take_notices())
    taken.push_back({n.kind, n.step, n.unix_seconds, std::move(n.detail)});
  return taken;
}

caf::actor spawn_worker(node_actor* self, int slot, std::optional<recover_msg> replacing) {
  auto& st = self->state;
  return self->spawn(run_worker, caf::actor_cast<caf::actor>(self), st.work, st.start, slot,
                     st.progress.at(static_cast<std::size_t>(slot)), std::move(replacing));
}

// Tells the job this node is alive, how far each worker got, what each noted for the job's events
// since the last heartbeat, and the process's memory.
void send_heartbeat(node_actor* self, const NodeOptions& options) {
  auto& st = self->state;
  heartbeat_msg beat{st.node_index, {}};
  for (std::size_t slot = 0; slot < st.progress.size(); ++slot) {
    const monitor::ProgressSnapshot now = st.progress[slot]->snapshot();
    std::vector<step_beat> steps;
    for (const monitor::StepRecord& r : now.recent_steps)
      steps.push_back({r.step,    r.start_unix_seconds, r.seconds,     r.loss,
                       r.tokens,  r.wire_bytes,         r.plain_bytes, r.compress_seconds,
                       r.lr,      r.grad_norm,          r.validated,   r.val_loss,
                       r.experts, r.expert_slots,       r.batch_share, r.micro_batch_seconds,
                       r.islands, r.outer_syncs,        r.outer_bytes, r.next_sync_step});
    beat.workers.push_back({st.first_rank + static_cast<int>(slot), now.steps_done, now.progress, now.idle_seconds,
                            now.activity, now.waiting_for, now.waiting_seconds, std::move(steps),
                            notices(*st.progress[slot])});
  }
  for (const monitor::MemoryFigure& f : memory_reading())
    beat.memory.push_back({f.device, f.kind, static_cast<std::int64_t>(f.bytes), static_cast<std::int64_t>(f.peak)});
  beat.resident_bytes = static_cast<std::int64_t>(compute::resident_bytes());
  beat.peak_resident_bytes = static_cast<std::int64_t>(compute::peak_resident_bytes());
  self->send(st.job, heartbeat_atom_v, std::move(beat));
  if (options.heartbeat_sent) options.heartbeat_sent();
}

// What every phase answers alike: the job's stop, and the orders of the job's monitor actor.
caf::message_handler every_phase(node_actor* self, const NodeOptions& options) {
  return {
      [=](stop_atom, const stop_msg& stop) { end_node(self, stop.exit_code, stop.reason); },
      [=](control_atom, const control_msg& order) -> control_reply_msg {
        // Only actors of the job process (its monitor) give orders.
        if (!self->current_sender() || self->current_sender()->node() != self->state.job.node())
          return {"refused: control orders come only from the job process", {}};
        if (!options.control) return {"this node takes no control orders", {}};
        return options.control(order);
      },
  };
}

caf::behavior working(node_actor* self, const NodeOptions& options) {
  const caf::message_handler phase{
      [=](heartbeat_atom) {
        send_heartbeat(self, options);
        self->delayed_send(self, options.heartbeat_interval, heartbeat_atom_v);
      },
      [=](done_atom, node_done_msg& done, int slot) {
        auto& st = self->state;
        done.node_index = st.node_index;
        ++st.workers_done;
        if (st.failure_reported) return;
        if (done.threw && st.start.recovery.mode == RecoveryMode::in_place && !st.rescue_ordered) {
          st.awaiting_word.insert(slot);
          self->send(st.job, recover_atom_v,
                     worker_failed_msg{st.node_index, st.first_rank + slot, done.reason,
                                       st.progress.at(static_cast<std::size_t>(slot))->snapshot().steps_done});
          return;
        }
        const bool all_done = st.workers_done == static_cast<int>(st.workers.size());
        if (done.exit_code != 0 && st.rescue_ordered && !all_done) {
          if (!st.held_failure) st.held_failure = done;
          return;
        }
        if (st.held_failure) done = *st.held_failure;
        // The workers' last notes go out before the report that ends this node's part.
        if (done.exit_code != 0 || all_done) send_heartbeat(self, options);
        if (done.exit_code != 0) {
          st.failure_reported = true;
          self->send(st.job, done_atom_v, done);
        } else if (all_done) {
          self->send(st.job, done_atom_v, done);
        }
      },
      // A rescue goes to every worker; each writer answers through this supervisor, so its answer
      // reaches the job before this node's failure report.
      [=](rescue_atom, rescue_msg& order) {
        self->state.rescue_ordered = true;
        order.reply_to = caf::actor_cast<caf::actor>(self);
        for (const caf::actor& worker : self->state.workers) self->send(worker, rescue_atom_v, order);
        // A worker waiting at its step boundary (paused from the shell) reads no mailbox: wake it.
        if (options.control) options.control(control_msg{"rescue"});
      },
      [=](rescue_atom, const rescue_done_msg& done) { self->send(self->state.job, rescue_atom_v, done); },
      // In place: a failed worker named by the order is respawned in this process, as a
      // replacement; every other worker gives up its step and takes part in the recovery.
      [=](recover_atom, const recover_msg& order) {
        auto& st = self->state;
        if (!self->current_sender() || self->current_sender()->node() != st.job.node()) return;
        for (int slot = 0; slot < st.slots; ++slot) {
          const int rank = st.first_rank + slot;
          const bool failed =
              std::find(order.failed_ranks.begin(), order.failed_ranks.end(), rank) != order.failed_ranks.end();
          if (failed && st.awaiting_word.erase(slot)) {
            --st.workers_done;
            monitor::logger("node")->warn("node {}: respawning the worker of rank {} in this process (epoch {})",
                                          st.node_index, rank, order.epoch);
            st.workers.at(static_cast<std::size_t>(slot)) = spawn_worker(self, slot, order);
          } else {
            self->send(st.workers.at(static_cast<std::size_t>(slot)), recover_atom_v, order);
          }
        }
        // A grow comes while the shell's rejoin holds every worker after its checkpoint: the order is
        // in each worker's mailbox now, so released, it takes it in the step after that boundary.
        if (order.grown_world > 0 && options.control) options.control(control_msg{"act", -1, "none", {}, -1});
      },
      // The job grew in place: a worker respawned from now on starts in the grown world.
      [=](start_atom, const start_msg& grown) {
        auto& st = self->state;
        if (!self->current_sender() || self->current_sender()->node() != st.job.node()) return;
        st.start = grown;
      },
      // DiLoCo's islands left out or rejoining: every worker's outer group changes (island_membership.hpp).
      [=](recover_atom, const islands_msg& order) {
        auto& st = self->state;
        if (!self->current_sender() || self->current_sender()->node() != st.job.node()) return;
        for (const caf::actor& worker : st.workers) self->send(worker, recover_atom_v, order);
      },
      [=](recover_atom, const training_resumed& resumed) {
        if (options.recovered) options.recovered(resumed);
      },
  };
  return phase.or_else(every_phase(self, options));
}

// joining ─► working: every slot's worker starts; as a replacement (`replacing`) when this process
// was started again in place of a lost or silent one.
void start_working(node_actor* self, const NodeWork& work, const NodeOptions& options, const start_msg& start,
                   const std::optional<recover_msg>& replacing) {
  auto& st = self->state;
  monitor::logger("node")->info("node {} starts with {} ranks on {} nodes{}", st.node_index, start.world_size,
                                start.nodes.size(),
                                replacing ? " as the replacement of its lost process (epoch " +
                                                std::to_string(replacing->epoch) + ")"
                                          : std::string{});
  st.first_rank = start.nodes.at(static_cast<std::size_t>(st.node_index)).first_rank;
  st.work = work;
  st.start = start;
  for (int slot = 0; slot < st.slots; ++slot) {
    std::function<std::string()> oldest_receive;
    if (options.oldest_receive) oldest_receive = [=] { return options.oldest_receive(slot); };
    st.progress.push_back(std::make_shared<monitor::WorkProgress>(std::move(oldest_receive)));
    st.workers.push_back(spawn_worker(self, slot, replacing));
  }
  st.phase = NodePhase::working;
  self->send(self, heartbeat_atom_v);
  self->become(working(self, options));
}

// The join's answer may come after the start message: the job starts every node before it
// answers the last one to join. So joining waits for start_msg, accepted or not yet answered.
caf::behavior joining(node_actor* self, const NodeWork& work, const NodeOptions& options) {
  const caf::message_handler phase{
      [=](start_atom, const start_msg& start) { start_working(self, work, options, start, std::nullopt); },
      [=](start_atom, const start_msg& start, const recover_msg& replacing) {
        start_working(self, work, options, start, replacing);
      },
  };
  return phase.or_else(every_phase(self, options));
}

caf::behavior node_supervisor(node_actor* self, caf::actor job, join_msg hello, NodeWork work, NodeOptions options,
                              caf::actor listener) {
  auto& st = self->state;
  st.job = job;
  st.listener = std::move(listener);
  st.node_index = hello.node_index;
  st.slots = static_cast<int>(hello.comm_addresses.size());
  hello.node = caf::actor_cast<caf::actor>(self);
  self->monitor(job);
  self->set_down_handler([=](const caf::down_msg& down) {
    if (down.source == self->state.job.address())
      end_node(self, 1, "lost the job supervisor: " + to_string(down.reason));
  });
  self->request(job, std::chrono::seconds(30), join_atom_v, std::move(hello))
      .then(
          [=](const join_result_msg& result) {
            if (!result.accepted) end_node(self, 2, "the job rejected this node: " + result.reason);
          },
          [=](const caf::error& err) { end_node(self, 2, "joining the job failed: " + to_string(err)); });
  return joining(self, work, options);
}

}  // namespace

caf::actor spawn_node_supervisor(caf::actor_system& system, caf::actor job, join_msg hello, NodeWork work,
                                 NodeOptions options, caf::actor listener) {
  return system.spawn(node_supervisor, std::move(job), std::move(hello), std::move(work), std::move(options),
                      std::move(listener));
}

}  // namespace troupe::actors
