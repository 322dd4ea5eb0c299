#include "actors/control/monitor_actor.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <sstream>
#include <utility>

#include <spdlog/fmt/fmt.h>

#include "actors/control/monitor_report.hpp"
#include "actors/control/web_feed.hpp"
#include "actors/idle_class.hpp"
#include "actors/local_messages.hpp"
#include "actors/messages.hpp"
#include "checkpoint/store.hpp"
#include "monitor/duration_text.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {
namespace {

using Clock = std::chrono::steady_clock;

constexpr auto order_timeout = std::chrono::seconds(5);     // a node's answer to a control order
constexpr auto checkpoint_wait = std::chrono::seconds(120);  // for every writer and the commit
constexpr auto pause_wait = std::chrono::seconds(30);        // for every rank to reach the boundary
constexpr auto trace_wait = std::chrono::seconds(120);
constexpr auto pending_poll = std::chrono::milliseconds(20);  // the view's period while a reply waits
constexpr std::size_t max_token = 256;
constexpr std::size_t sparkline_width = 60;
constexpr std::size_t max_status_events = 1000000;  // more than a job makes: status reads them all
constexpr std::int32_t max_events_reply = 10000;    // events in one reply to an events request

// A shell request answered later, once the job shows what it waits for.
struct PendingReply {
  enum class Kind { checkpoint, pause, trace, drain, rejoin } kind;
  caf::response_promise promise;
  std::int64_t step = 0;   // checkpoint, pause: the agreed boundary; trace: the first step recorded
  std::int64_t steps = 0;  // trace: how many; drain: the node
  Clock::time_point deadline;
};

struct monitor_state {
  MonitorPlan plan;
  job_view_msg view;
  StepHistory history;
  bool paused = false;
  std::int64_t paused_after = -1;
  Clock::time_point paused_at;
  bool agreeing = false;  // one hold-and-act at a time
  bool rejoining = false;  // a rejoin was accepted and the job has not grown (nor refused it) yet
  bool held_for_rejoin = false;  // every worker waits at the rejoin's checkpoint for the job's answer
  // A pause is under way from its agreement until every rank stands at its boundary or its wait
  // ends; a resume given meanwhile waits for that, so the two take effect in the order given.
  bool pausing = false;
  std::optional<caf::response_promise> resume_after_pause;
  std::vector<PendingReply> pending;
  bool attempt_ended = false;  // the supervisor is gone; only the job's events are still read here
  static inline const char* name = "monitor";
};

using monitor_actor = caf::stateful_actor<monitor_state>;

shell_reply_msg reply(const monitor_state& st, bool ok, std::string text, std::string attachment = {}) {
  return {ok, std::move(text), std::move(attachment), st.plan.attempt, st.plan.restarted_after};
}

PauseState pause_state(const monitor_state& st) {
  return {st.paused, st.paused_after,
          st.paused ? std::chrono::duration<double>(Clock::now() - st.paused_at).count() : 0.0};
}

std::vector<caf::actor> running_nodes(const monitor_state& st) {
  std::vector<caf::actor> nodes;
  for (const node_view& n : st.view.nodes)
    if (n.node && !n.done) nodes.push_back(n.node);
  return nodes;
}

// Sends `order` to every running node; `done` gets the first error (empty when all obeyed) and
// every node's reply, once all have answered.
void order_all(monitor_actor* self, control_msg order,
               std::function<void(const std::string& error, const std::vector<control_reply_msg>&)> done) {
  const std::vector<caf::actor> nodes = running_nodes(self->state);
  struct Gather {
    std::size_t remaining;
    std::string error;
    std::vector<control_reply_msg> replies;
  };
  auto gather = std::make_shared<Gather>(Gather{nodes.size(), {}, {}});
  if (nodes.empty()) {
    done("no node is running", {});
    return;
  }
  auto answered = [gather, done](std::string error, control_reply_msg r) {
    if (!error.empty() && gather->error.empty()) gather->error = std::move(error);
    gather->replies.push_back(std::move(r));
    if (--gather->remaining == 0) done(gather->error, gather->replies);
  };
  for (const caf::actor& node : nodes)
    self->request(node, order_timeout, control_atom_v, order)
        .then([answered](control_reply_msg& r) { answered(r.error, r); },
              [answered](caf::error& e) { answered("a node did not answer: " + to_string(e), {}); });
}

// Agrees with every rank on one step boundary and orders `action` there (see step_control.hpp):
// hold every worker at its next boundary, take the largest, act there. `done` gets the boundary,
// or an error after which every hold is released.
void agree(monitor_actor* self, const std::string& action,
           std::function<void(const std::string& error, std::int64_t boundary)> done) {
  auto& st = self->state;
  if (!st.view.running) return done("the job has not started training yet", -1);
  if (st.agreeing) return done("another order is being agreed on; try again", -1);
  if (st.held_for_rejoin) return done("a rejoin holds the job at its checkpoint; try again", -1);
  st.agreeing = true;
  order_all(self, {"hold", -1, {}, {}, -1},
            [self, action, done](const std::string& error, const std::vector<control_reply_msg>& replies) {
              auto& st = self->state;
              std::int64_t boundary = -1;
              bool finished = false, started = false;
              for (const control_reply_msg& r : replies)
                for (std::int64_t b : r.boundaries) {
                  finished |= b == -1;
                  started |= b >= 0;
                  boundary = std::max(boundary, b);
                }
              std::string why = error;
              if (why.empty() && finished) why = "the job is finishing: a rank has done its last step";
              if (why.empty() && !started) why = "the job has not started training yet";
              if (why.empty() && boundary >= st.plan.total_steps)
                why = "the job is in its last step";
              order_all(self, {"act", boundary, why.empty() ? action : "none", {}, -1},
                        [self](const std::string&, const std::vector<control_reply_msg>&) {
                          self->state.agreeing = false;
                        });
              done(why, why.empty() ? boundary : -1);
            });
}

bool parse_count(const std::string& text, long low, long high, long& value) {
  std::size_t used = 0;
  try {
    value = std::stol(text, &used);
  } catch (const std::exception&) {
    return false;
  }
  return used == text.size() && value >= low && value <= high;
}

// The shell's rejoin, once its checkpoint (`written`) committed: the job supervisor grows the job or
// says why not, and the shell reads which.
// Ends the rejoin's hold at its checkpoint: the job has grown (its order is in every worker's
// mailbox before its node releases it; this release is for the other answers), refused, or not
// answered.
void release_rejoin_hold(monitor_actor* self) {
  if (!self->state.held_for_rejoin) return;
  self->state.held_for_rejoin = false;
  order_all(self, {"act", -1, "none", {}, -1}, [](const std::string&, const std::vector<control_reply_msg>&) {});
}

// The rejoin's checkpoint is committed and every worker waits after it: the job grows there.
void ask_job_to_grow(monitor_actor* self, caf::response_promise promise, const std::string& written) {
  auto& st = self->state;
  std::string lines;
  for (const std::string& line : st.plan.left_out) lines += (lines.empty() ? "" : ", ") + line;
  self->request(st.plan.job, order_timeout, rejoin_atom_v)
      .then(
          [=](const std::string& refusal) mutable {
            auto& st = self->state;
            std::string text = refusal.empty()
                                   ? fmt::format("rejoin: {}; the job grows with {} back", written, lines)
                                   : fmt::format("rejoin: {}; refused: {}; the job goes on", written, refusal);
            monitor::logger("monitor")->warn("shell: {}", text);
            if (!refusal.empty()) st.rejoining = false;
            release_rejoin_hold(self);
            promise.deliver(reply(st, refusal.empty(), std::move(text)));
          },
          [=](caf::error& error) mutable {
            auto& st = self->state;
            st.rejoining = false;
            release_rejoin_hold(self);
            promise.deliver(reply(st, false, "rejoin: the job did not answer the order: " + to_string(error)));
          });
}

// The shell's resume: every node's ranks go on from the pause.
void resume_job(monitor_actor* self, caf::response_promise rp) {
  if (!self->state.paused) return rp.deliver(reply(self->state, false, "resume: the job is not paused"));
  order_all(self, {"resume", -1, {}, {}, -1}, [self, rp](const std::string& error, const auto&) mutable {
    auto& st = self->state;
    const double seconds = std::chrono::duration<double>(Clock::now() - st.paused_at).count();
    st.paused = false;
    self->send(st.plan.job, pause_atom_v, false);
    monitor::logger("monitor")->info("shell: job resumed after step {}", st.paused_after);
    rp.deliver(error.empty() ? reply(st, true,
                                     fmt::format("resumed after step {} (paused {})", st.paused_after,
                                                 monitor::duration_text(seconds)))
                             : reply(st, false, "resume: " + error));
  });
}

// The pause under way has taken effect, or failed: a resume that waited for it goes now.
void pause_over(monitor_actor* self) {
  auto& st = self->state;
  st.pausing = false;
  if (auto rp = std::exchange(st.resume_after_pause, std::nullopt)) resume_job(self, std::move(*rp));
}

// Delivers the pending replies whose condition the latest view meets, or whose time is up.
void settle_pending(monitor_actor* self) {
  auto& st = self->state;
  const auto now = Clock::now();
  auto settled = [&](PendingReply& p) {
    switch (p.kind) {
      case PendingReply::Kind::checkpoint:
      case PendingReply::Kind::drain:
      case PendingReply::Kind::rejoin: {
        const std::filesystem::path folder =
            std::filesystem::path(st.plan.checkpoint_dir) / checkpoint::step_folder_name(p.step);
        auto committed = checkpoint::committed_steps(st.plan.checkpoint_dir);
        if (committed && std::find(committed->begin(), committed->end(), p.step) != committed->end()) {
          std::string text = fmt::format("checkpoint after step {} written: {}", p.step, folder.string());
          if (p.kind == PendingReply::Kind::drain) {
            text = fmt::format("drain node {}: {}; the job restarts without node {}", p.steps, text, p.steps);
            monitor::logger("monitor")->warn("shell: {}", text);
            self->send(st.plan.job, drain_atom_v, static_cast<int>(p.steps));
          }
          if (p.kind == PendingReply::Kind::rejoin) {
            ask_job_to_grow(self, p.promise, text);
            return true;
          }
          p.promise.deliver(reply(st, true, text));
          return true;
        }
        if (now < p.deadline) return false;
        if (p.kind == PendingReply::Kind::rejoin) {
          st.rejoining = false;
          release_rejoin_hold(self);
        }
        p.promise.deliver(reply(st, false, fmt::format("checkpoint after step {}: not committed within {} s; the "
                                                       "job's log says why",
                                                       p.step, checkpoint_wait.count())));
        return true;
      }
      case PendingReply::Kind::pause: {
        std::vector<int> moving;
        const std::string paused = "paused after step " + std::to_string(p.step);
        int ranks = 0;
        for (const node_view& n : st.view.nodes)
          for (const worker_beat& w : n.workers) {
            ++ranks;
            if (w.activity != paused) moving.push_back(w.rank);
          }
        if (moving.empty()) {
          p.promise.deliver(reply(st, true, fmt::format("paused after step {} on all {} ranks; `resume` continues",
                                                        p.step, ranks)));
          return true;
        }
        if (now < p.deadline) return false;
        p.promise.deliver(reply(st, false, fmt::format("pause ordered after step {}, but ranks {} have not stopped "
                                                       "there within {} s",
                                                       p.step, fmt::join(moving, ", "), pause_wait.count())));
        return true;
      }
      case PendingReply::Kind::trace: {
        const std::int64_t last = p.step + p.steps - 1;
        if (common_step(st.view, st.history) >= last) {
          std::size_t ranks = 0;
          for (const node_view& n : st.view.nodes) ranks += n.workers.size();
          p.promise.deliver(reply(st, true, fmt::format("trace of steps {}-{} on {} ranks", p.step, last, ranks),
                                  trace_json(st.view, st.history, p.step, last)));
          return true;
        }
        if (now < p.deadline) return false;
        p.promise.deliver(reply(st, false, fmt::format("trace: steps {}-{} did not finish within {} s", p.step, last,
                                                       trace_wait.count())));
        return true;
      }
    }
    return true;
  };
  bool pause_answered = false;
  st.pending.erase(std::remove_if(st.pending.begin(), st.pending.end(),
                                  [&](PendingReply& p) {
                                    const bool answered = settled(p);
                                    pause_answered |= answered && p.kind == PendingReply::Kind::pause;
                                    return answered;
                                  }),
                   st.pending.end());
  if (pause_answered) pause_over(self);
}

void pend(monitor_actor* self, PendingReply::Kind kind, caf::response_promise promise, std::int64_t step,
          std::int64_t steps, std::chrono::seconds wait) {
  self->state.pending.push_back({kind, std::move(promise), step, steps, Clock::now() + wait});
}

// checkpoint, drain and rejoin: a checkpoint at a boundary every rank agrees on, answered once it
// is committed (settle_pending), or at once with `refusal` of why no boundary was agreed.
void checkpoint_at_boundary(monitor_actor* self, caf::response_promise rp, PendingReply::Kind kind, std::int64_t steps,
                            std::function<shell_reply_msg(const std::string& why)> refusal) {
  // A rejoin holds every worker after its checkpoint, so the job grows at that boundary: a grow
  // order reaching workers at a boundary of their own choosing could find them past their last step.
  const bool hold = kind == PendingReply::Kind::rejoin;
  agree(self, hold ? "checkpoint_and_hold" : "checkpoint",
        [self, rp, kind, steps, refusal, hold](const std::string& error, std::int64_t boundary) mutable {
          if (!error.empty()) {
            rp.deliver(refusal(error));
            return;
          }
          self->state.held_for_rejoin = hold;
          pend(self, kind, rp, boundary, steps, checkpoint_wait);
        });
}

// The job as it is now: the steps remembered, the web view updated, the replies it allows delivered.
void take_view(monitor_actor* self, job_view_msg view) {
  auto& st = self->state;
  st.view = std::move(view);
  remember_steps(st.history, st.view);
  if (st.plan.web) st.plan.web->update(st.plan, st.view, st.history);
  settle_pending(self);
}

// The shell's command `words`, answered through `rp` now or later.
void command(monitor_actor* self, const std::vector<std::string>& words, caf::response_promise rp) {
  auto& st = self->state;
  auto answer = [&](bool ok, std::string text) { rp.deliver(reply(st, ok, std::move(text))); };
  const std::string& verb = words.front();
  const std::size_t args = words.size() - 1;
  auto usage = [&](const std::string& form) { answer(false, "usage: " + form); };
  const int nodes = static_cast<int>(st.view.nodes.size());

  if (verb == "hello" && args == 0) {
    answer(true,
           fmt::format(
               "connected to the job: {} nodes, {} ranks, {} steps{}", nodes, st.plan.world_size, st.plan.total_steps,
               st.plan.restarts > 0 ? fmt::format(" (restart {} of {})", st.plan.restarts, st.plan.max_restarts) : ""));
  } else if (verb == "status" && args == 0) {
    answer(true, status_text(st.plan, st.view, st.history, pause_state(st),
                             st.plan.events ? st.plan.events->since(0, max_status_events) : std::vector<job_event>{}));
  } else if (verb == "nodes" && args == 0) {
    answer(true, nodes_text(st.view));
  } else if (verb == "memory" && args == 0) {
    answer(true, memory_text(st.view));
  } else if (verb == "workers" || verb == "top") {
    auto selection = parse_rank_selection(std::span(words).subspan(1));
    if (!selection) return answer(false, verb + ": " + selection.error().message);
    auto text = verb == "workers" ? workers_text(st.plan, st.view, *selection)
                                  : top_text(st.plan, st.view, st.history, pause_state(st), *selection);
    if (!text) return answer(false, verb + ": " + text.error().message);
    answer(true, *text);
  } else if (verb == "loss" && args == 0) {
    answer(true, loss_text(st.history, sparkline_width));
  } else if (verb == "experts" && args == 0) {
    answer(true, experts_text(st.history));
  } else if (verb == "checkpoint" && args == 0) {
    if (st.plan.checkpoint_dir.empty())
      return answer(false, "checkpoint: this job has no checkpoint.dir to save into (set --checkpoint.dir)");
    checkpoint_at_boundary(self, rp, PendingReply::Kind::checkpoint, 0, [self](const std::string& why) {
      return reply(self->state, false, "checkpoint: " + why);
    });
  } else if (verb == "pause" && args == 0) {
    if (st.paused) return answer(false, fmt::format("already paused after step {}", st.paused_after));
    if (st.pausing) return answer(false, "pause: a pause is already under way");
    st.pausing = true;
    agree(self, "pause", [self, rp](const std::string& error, std::int64_t boundary) mutable {
      auto& st = self->state;
      if (!error.empty()) {
        rp.deliver(reply(st, false, "pause: " + error));
        pause_over(self);
        return;
      }
      st.paused = true;
      st.paused_after = boundary;
      st.paused_at = Clock::now();
      self->send(st.plan.job, pause_atom_v, true);
      monitor::logger("monitor")->info("shell: job paused after step {}", boundary);
      pend(self, PendingReply::Kind::pause, rp, boundary, 0, pause_wait);
    });
  } else if (verb == "resume" && args == 0) {
    if (!st.pausing) return resume_job(self, rp);
    if (st.resume_after_pause) return answer(false, "resume: a resume already waits for the pause under way");
    st.resume_after_pause = rp;
  } else if (verb == "trace" && (args == 1 || args == 2)) {
    long steps = 3;
    if (args == 2 && !parse_count(words[2], 1, 64, steps))
      return answer(false, "trace: STEPS must be a whole number from 1 to 64, not '" + words[2] + "'");
    if (!st.view.running) return answer(false, "trace: the job has not started training yet");
    if (st.paused) return answer(false, "trace: the job is paused; `resume` first");
    std::int64_t next = 0;
    for (const node_view& n : st.view.nodes)
      for (const worker_beat& w : n.workers) next = std::max(next, w.steps_done + 1);
    if (next + steps - 1 > st.plan.total_steps)
      return answer(false, fmt::format("trace: the job has only {} steps left", st.plan.total_steps - next + 1));
    pend(self, PendingReply::Kind::trace, rp, next, steps, trace_wait);
  } else if (verb == "trace") {
    usage("trace FILE [STEPS]");
  } else if (verb == "log" && (args == 1 || args == 2)) {
    const std::string level = words[1], subsystem = args == 2 ? words[2] : "";
    if (Status set = monitor::set_log_level(level, subsystem); !set) return answer(false, "log: " + set.error().message);
    order_all(self, {"log", -1, level, subsystem, -1},
              [self, rp, level, subsystem](const std::string& error, const auto& replies) mutable {
                rp.deliver(error.empty()
                               ? reply(self->state, true,
                                       fmt::format("log level {} for {} in the job process and {} node process(es)",
                                                   level, subsystem.empty() ? "every subsystem" : subsystem,
                                                   replies.size()))
                               : reply(self->state, false, "log: set in the job process, but " + error));
              });
  } else if (verb == "log") {
    usage("log LEVEL [SUBSYSTEM]");
  } else if (verb == "kill" && args == 2 && words[1] == "worker") {
    long rank = 0;
    if (!parse_count(words[2], 0, st.plan.world_size - 1, rank))
      return answer(false, fmt::format("kill worker: RANK must be 0 to {}, not '{}'", st.plan.world_size - 1, words[2]));
    caf::actor node;
    for (const node_view& n : st.view.nodes)
      for (const worker_beat& w : n.workers)
        if (w.rank == rank && !n.done) node = n.node;
    if (!node) return answer(false, fmt::format("kill worker: rank {} is not running", rank));
    monitor::logger("monitor")->warn("shell: kill worker {} (drill)", rank);
    self->request(node, order_timeout, control_atom_v, control_msg{"fail", -1, {}, {}, static_cast<int>(rank)})
        .then(
            [self, rp, rank](control_reply_msg& r) mutable {
              const bool restarts = !self->state.plan.checkpoint_dir.empty();
              rp.deliver(r.error.empty()
                             ? reply(self->state, true,
                                     fmt::format("kill worker {}: its worker fails at its next step boundary; {}",
                                                 rank,
                                                 restarts ? "the job restarts from the newest checkpoint"
                                                          : "the job stops (no checkpoint.dir)"))
                             : reply(self->state, false, "kill worker: " + r.error));
            },
            [self, rp](caf::error& e) mutable {
              rp.deliver(reply(self->state, false, "kill worker: the node did not answer: " + to_string(e)));
            });
  } else if (verb == "kill" && args == 2 && words[1] == "node") {
    long index = 0;
    if (!parse_count(words[2], 0, nodes - 1, index))
      return answer(false, fmt::format("kill node: NODE must be 0 to {}, not '{}'", nodes - 1, words[2]));
    const node_view& n = st.view.nodes[static_cast<std::size_t>(index)];
    if (n.pid == 0 || n.done) return answer(false, fmt::format("kill node: node {} is not running", index));
    if (static_cast<std::size_t>(index) >= st.plan.node_is_local.size() ||
        !st.plan.node_is_local[static_cast<std::size_t>(index)])
      return answer(false, fmt::format("kill node: node {} runs on {}, not on the job's machine; only local node "
                                       "processes can be signalled",
                                       index, n.host));
    monitor::logger("monitor")->warn("shell: kill node {} (drill): SIGKILL to pid {}", index, n.pid);
    if (!kill_node_process(n.pid))
      return answer(false, fmt::format("kill node: SIGKILL to pid {} failed: {}", n.pid, std::strerror(errno)));
    answer(true, fmt::format("kill node {}: SIGKILL sent to pid {} ({}); {}", index, n.pid, n.host,
                             st.plan.replaces_lost_nodes        ? "the job starts that node's process again, in place"
                             : st.plan.checkpoint_dir.empty() ? "the job stops (no checkpoint.dir)"
                                                              : "the job restarts from the newest checkpoint"));
  } else if (verb == "drain" && args == 2 && words[1] == "node") {
    long index = 0;
    if (!parse_count(words[2], 0, nodes - 1, index))
      return answer(false, fmt::format("drain node: NODE must be 0 to {}, not '{}'", nodes - 1, words[2]));
    if (nodes < 2) return answer(false, "drain node: the job has one node; nothing would be left");
    if (st.plan.checkpoint_dir.empty())
      return answer(false, "drain node: this job has no checkpoint.dir to save into and restart from");
    checkpoint_at_boundary(self, rp, PendingReply::Kind::drain, index, [self](const std::string& why) {
      return reply(self->state, false, "drain node: " + why);
    });
  } else if (verb == "drain") {
    usage("drain node NODE");
  } else if (verb == "rejoin" && args == 0) {
    if (st.rejoining)
      return answer(false, "rejoin: refused: a rejoin is under way already; `status` shows when the job has grown");
    if (st.plan.left_out.empty())
      return answer(false, "rejoin: the job runs on every node of its host file; no node was left out to come back");
    if (st.plan.checkpoint_dir.empty())
      return answer(false, "rejoin: this job has no checkpoint.dir to save into and restart from");
    st.rejoining = true;
    checkpoint_at_boundary(self, rp, PendingReply::Kind::rejoin, 0, [self](const std::string& why) {
      self->state.rejoining = false;
      return reply(self->state, false, "rejoin: " + why);
    });
  } else if (verb == "rejoin") {
    usage("rejoin");
  } else if (verb == "kill") {
    usage("kill worker RANK | kill node NODE");
  } else {
    answer(false, "unknown command '" + verb + "'; `help` lists the commands");
  }
}

caf::behavior monitor_behavior(monitor_actor* self, MonitorPlan plan) {
  self->state.plan = std::move(plan);
  // The attempt ends with its job supervisor; so does this monitor, or it would keep the
  // attempt's actor system from shutting down. A shell reconnects to the next attempt's. Where
  // programs read the job's events, it stays until the port forgets it (ControlPort), answering
  // their last reads; a shell is told the attempt ended.
  self->monitor(self->state.plan.job);
  self->set_down_handler([=](const caf::down_msg& down) {
    auto& st = self->state;
    if (down.source != st.plan.job.address()) return;
    for (PendingReply& p : st.pending) p.promise.deliver(reply(st, false, "the job's attempt ended before this was done"));
    st.pending.clear();
    if (!st.plan.events || !st.plan.events->read_by_anyone()) return self->quit();
    st.attempt_ended = true;
  });
  self->send(self, view_atom_v);
  return {
      [=](view_atom) {
        auto& st = self->state;
        self->request(st.plan.job, order_timeout, view_atom_v)
            .then([=](job_view_msg& view) { take_view(self, std::move(view)); }, [](caf::error&) {});
        // An order waiting for its checkpoint or boundary is answered as soon as the job gets there.
        self->delayed_send(self, st.pending.empty() ? st.plan.poll : pending_poll, view_atom_v);
      },
      // From launch in this process only (ControlPort::grew): the job grew in place.
      [=](grown_atom, const grown_msg& grown) {
        auto& st = self->state;
        if (self->current_sender() && self->current_sender()->node() != self->node()) return;
        st.plan.world_size = grown.world_size;
        st.plan.dp = grown.world_size / (st.plan.pp * st.plan.tp);
        st.plan.node_is_local = grown.node_is_local;
        st.plan.left_out = grown.left_out;
        st.rejoining = false;
      },
      [=](events_atom, const events_request_msg& request) -> events_reply_msg {
        auto& st = self->state;
        if (request.token.empty() || request.token.size() > max_token || request.token != st.plan.token) {
          monitor::logger("monitor")->warn("events request refused: {}",
                                           request.token.empty() ? "no job token" : "wrong job token");
          return {request.token.empty() ? "refused: no job token" : "refused: wrong job token", {}, 0};
        }
        if (!st.plan.events) return {"this job keeps no events", {}, 0};
        const auto limit = static_cast<std::size_t>(std::clamp(request.limit, std::int32_t{1}, max_events_reply));
        events_reply_msg reply{{}, st.plan.events->since(request.after, limit), st.plan.events->last_seq(),
                               st.attempt_ended};
        st.plan.events->note_read(reply.events.empty() ? request.after : reply.events.back().seq);
        return reply;
      },
      [=](shell_atom, const shell_request_msg& request) {
        auto& st = self->state;
        auto rp = self->make_response_promise();
        auto log = monitor::logger("monitor");
        const std::string from = self->current_sender() ? to_string(self->current_sender()->node()) : "?";
        if (request.line.size() > max_shell_line || request.token.size() > max_token) {
          log->warn("shell request from {} refused: {} bytes (limit {})", from, request.line.size() + request.token.size(),
                    max_shell_line);
          rp.deliver(reply(st, false, fmt::format("refused: the request is longer than {} bytes", max_shell_line)));
          return rp;
        }
        if (request.token.empty() || request.token != st.plan.token) {
          log->warn("shell request from {} refused: {}", from, request.token.empty() ? "no job token" : "wrong job token");
          rp.deliver(reply(st, false, request.token.empty() ? "refused: no job token (give --token-file or TROUPE_TOKEN)"
                                                            : "refused: wrong job token"));
          return rp;
        }
        if (st.attempt_ended) {
          rp.deliver(reply(st, false, "the job's attempt ended; the next one answers on this port"));
          return rp;
        }
        std::vector<std::string> words;
        std::istringstream in(request.line);
        for (std::string word; in >> word;) words.push_back(word);
        if (words.empty()) {
          rp.deliver(reply(st, false, "empty command; `help` lists the commands"));
          return rp;
        }
        if (words.front() != "hello" && words.front() != "top" && words.front() != "status")
          log->info("shell: {}", request.line);
        // The view polled may predate this attempt's start by up to a poll period; a command
        // reads the job as it is now.
        self->request(st.plan.job, order_timeout, view_atom_v)
            .then(
                [=](job_view_msg& view) mutable {
                  take_view(self, std::move(view));
                  command(self, words, rp);
                },
                [=](caf::error& e) mutable {
                  rp.deliver(reply(self->state, false, "the job did not answer: " + to_string(e)));
                });
        return rp;
      },
  };
}

}  // namespace

caf::actor spawn_monitor(caf::actor_system& system, MonitorPlan plan) {
  return system.spawn(monitor_behavior, std::move(plan));
}

}  // namespace troupe::actors
