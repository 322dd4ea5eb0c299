#include "actors/node_supervisor.hpp"

#include "actors/mailbox_comm.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {
namespace {

struct node_supervisor_state {
  caf::actor job;
  caf::actor listener;
  caf::actor worker;
  std::shared_ptr<monitor::WorkProgress> progress;
  int node_index = -1;
  bool ended = false;
  static inline const char* name = "node_supervisor";
};

using node_actor = caf::stateful_actor<node_supervisor_state>;

void end_node(node_actor* self, int exit_code, const std::string& reason) {
  auto& st = self->state;
  if (st.ended) return;
  st.ended = true;
  if (st.worker) self->send(st.worker, stop_atom_v, stop_msg{exit_code, reason});
  self->send(st.listener, done_atom_v, job_outcome_msg{exit_code, reason});
  self->quit();
}

// Runs `work` and sends its outcome to `supervisor`; a stop request ends it at its next wait.
void run_worker(caf::blocking_actor* self, caf::actor supervisor, NodeWork work, start_msg start,
                std::shared_ptr<monitor::WorkProgress> progress) {
  node_done_msg done;
  try {
    done = work(start, self, *progress);
  } catch (const WorkStopped& stopped) {
    done = {-1, 1, std::string("stopped: ") + stopped.what()};
  }
  self->send(supervisor, done_atom_v, done);
}

caf::behavior node_supervisor(node_actor* self, caf::actor job, join_msg hello, NodeWork work, NodeOptions options,
                              caf::actor listener) {
  auto& st = self->state;
  st.job = job;
  st.listener = std::move(listener);
  st.node_index = hello.node_index;
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
  return {
      [=](start_atom, const start_msg& start) {
        auto& st = self->state;
        monitor::logger("node")->info("node {} starts with {} ranks on {} nodes", st.node_index, start.world_size,
                                      start.nodes.size());
        st.progress = std::make_shared<monitor::WorkProgress>(options.oldest_receive);
        st.worker = self->spawn(run_worker, caf::actor_cast<caf::actor>(self), work, start, st.progress);
        self->send(self, heartbeat_atom_v);
      },
      [=](heartbeat_atom) {
        auto& st = self->state;
        const monitor::ProgressSnapshot now = st.progress->snapshot();
        self->send(st.job, heartbeat_atom_v,
                   heartbeat_msg{st.node_index, now.steps_done, now.progress, now.idle_seconds, now.activity,
                                 now.waiting_for, now.waiting_seconds});
        self->delayed_send(self, options.heartbeat_interval, heartbeat_atom_v);
      },
      [=](done_atom, node_done_msg& done) {
        done.node_index = self->state.node_index;
        self->send(self->state.job, done_atom_v, done);
      },
      [=](stop_atom, const stop_msg& stop) { end_node(self, stop.exit_code, stop.reason); },
  };
}

}  // namespace

caf::actor spawn_node_supervisor(caf::actor_system& system, caf::actor job, join_msg hello, NodeWork work,
                                 NodeOptions options, caf::actor listener) {
  return system.spawn(node_supervisor, std::move(job), std::move(hello), std::move(work), std::move(options),
                      std::move(listener));
}

}  // namespace troupe::actors
