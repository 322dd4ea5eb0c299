// Faults injected into a running job (drill.hpp): a node SIGKILLed (kill-node; node-lost, which
// then fails at every start) or SIGSTOPped (hang), a worker throwing (kill-worker), a node slowed
// to a straggler (slow-node), and the shell's drain then rejoin (grow). Recovery is in place where
// it applies (actors/supervision/recovery_path.hpp): only the failed worker is respawned, in its
// process, or only the lost node's process started again, its state from a surviving replica over
// the data plane or, where no replica holds it, every rank's own shards of the newest checkpoint;
// elsewhere every node restarts from the survivors' rescue snapshot or the newest checkpoint, and
// with fault.elastic goes on without a node that cannot come back. The verdict says which.

#include <signal.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

#include <spdlog/fmt/fmt.h>

#include "actors/idle_class.hpp"
#include "actors/process_environment.hpp"
#include "apps/commands/drill/drill.hpp"

namespace troupe::apps::drill {
namespace {

using namespace std::chrono_literals;
using actors::job_event;

Match step_done(long step) {
  return body_is<actors::step_trained>([step](const actors::step_trained& s) { return s.step == step; });
}

// The newest pid node `node` joined with, once it joined.
std::optional<int> node_pid(EventFeed& feed, int node) {
  std::optional<int> pid;
  if (!feed.wait_for(body_is<actors::node_joined>([node](const auto& joined) { return joined.node == node; }), 60s))
    return pid;
  for (const job_event& event : feed.events())
    if (const auto* joined = caf::get_if<actors::node_joined>(&event.body); joined && joined->node == node)
      pid = joined->pid;
  return pid;
}

}  // namespace

Verdict drill_running_job(const Drill& drill) {
  const DrillOptions& options = drill.options();
  Verdict v;
  const bool worker = options.scenario == "kill-worker", gone = options.scenario == "node-lost";
  std::vector<std::string> env;
  if (worker)
    env.push_back(std::string(actors::env::drill_throw_at.name) + "=" + std::to_string(options.target()) + ":" +
                  std::to_string(options.at_step));
  if (gone) env.push_back(std::string(actors::env::drill_node_gone.name) + "=" + std::to_string(options.target()));
  auto run = drill.start("drilled", false, true, env);
  if (!run) {
    v.fault = run.error().message;
    return v;
  }
  EventFeed& feed = *run->events;
  double fault_at = 0;
  std::size_t from = 0;
  if (worker) {
    // The worker throws as step at_step begins: when the step before it ended.
    const auto before = feed.wait_for(step_done(options.at_step - 1), 300s);
    if (!before) {
      v.fault = "the worker never reached step " + std::to_string(options.at_step);
      await_end(*run, v);
      return v;
    }
    fault_at = before->unix_seconds;
    v.fault = "the worker of rank " + std::to_string(options.target()) + " threw in step " + std::to_string(options.at_step);
  } else {
    std::string nodes;
    for (std::size_t i = 0; i < options.targets.size(); ++i)
      nodes += (i == 0 ? "" : i + 1 == options.targets.size() ? " and " : ", ") + std::to_string(options.targets[i]);
    nodes = (options.targets.size() == 1 ? "node " : "nodes ") + nodes;
    // The nodes' processes once the step is done: a restart before it (a failure the drill did not
    // cause) started new ones, and the first ones' pids may since belong to anything.
    std::vector<int> pids;
    std::string listed;
    if (feed.wait_for(step_done(options.at_step), 300s))
      for (int node : options.targets)
        if (const std::optional<int> pid = node_pid(feed, node)) {
          pids.push_back(*pid);
          listed += (listed.empty() ? "" : ", ") + std::to_string(*pid);
        }
    if (pids.size() != options.targets.size()) {
      v.fault = nodes + " or step " + std::to_string(options.at_step) + " never appeared in the job's events";
      await_end(*run, v);
      return v;
    }
    const bool hang = options.scenario == "hang";
    from = feed.size();
    std::string undelivered;  // a node whose process ended before the drill read the step's event
    for (int pid : pids)
      if (!(hang ? ::kill(pid, SIGSTOP) == 0 : actors::kill_node_process(pid)))
        undelivered += fmt::format("{}pid {}: {}", undelivered.empty() ? "" : ", ", pid, std::strerror(errno));
    fault_at = now();
    v.fault = std::string(hang ? "SIGSTOP" : "SIGKILL") + " to " + nodes + " (pid" + (pids.size() > 1 ? "s " : " ") +
              listed + ") after step " + std::to_string(options.at_step) +
              (gone ? ", which then fails at every restart" : "") +
              (undelivered.empty() ? "" : "; not delivered (" + undelivered + ")");
  }
  watch_recovery(feed, fault_at, body_is<actors::failure_detected>(), !worker, v, from);
  const std::optional<int> code = await_end(*run, v);
  const std::vector<job_event> events = feed.final_events(30s);
  add_job_account(events, v);
  add_later_failures(events, v);
  v.checks.push_back("job finished: " + finished(code));
  if (gone) {
    bool shrank = false, two_to_one = false;
    for (const job_event& event : events) {
      if (const auto* chosen = caf::get_if<actors::recovery_chosen>(&event.body))
        shrank = shrank || (chosen->route == actors::RecoveryRoute::shrink &&
                            std::find(chosen->nodes.begin(), chosen->nodes.end(), options.target()) != chosen->nodes.end());
      if (const auto* layout = caf::get_if<actors::layout_changed>(&event.body))
        two_to_one = two_to_one || (layout->route == actors::RecoveryRoute::shrink && layout->replicas_before == 2 &&
                                    layout->replicas_after == 1 && layout->per_replica_key == "train.grad_accum");
    }
    v.checks.push_back("the job went on without node " + std::to_string(options.target()) + ": " +
                       (shrank ? "yes" : "NO"));
    const bool equal_expected = shrink_keeps_weights(drill, two_to_one, v);
    v.passed = v.detected_after && v.recovered_after && code == 0 && shrank &&
               (!equal_expected || v.weights_equal.value_or(false));
    return v;
  }
  // In place, no node process may have been restarted but the one that was lost.
  const auto resumed_by = [&events](actors::RecoveryRoute route) {
    return std::any_of(events.begin(), events.end(), [route](const job_event& event) {
      const auto* resumed = caf::get_if<actors::training_resumed>(&event.body);
      return resumed && resumed->route == route;
    });
  };
  const bool island_left_out = resumed_by(actors::RecoveryRoute::island_left_out);
  const bool in_place = resumed_by(actors::RecoveryRoute::in_place_from_replica) ||
                        resumed_by(actors::RecoveryRoute::in_place_rollback) || island_left_out;
  // A worker that threw keeps its process, except in a DiLoCo island, whose node's process is
  // started again (its island left out) as a lost one's is; and a lost island of several nodes
  // has all of them started again.
  std::vector<int> replaced = worker ? std::vector<int>{} : options.targets;
  if (island_left_out)
    for (const job_event& event : events)
      if (const auto* resumed = caf::get_if<actors::training_resumed>(&event.body);
          resumed && resumed->route == actors::RecoveryRoute::island_left_out)
        replaced = resumed->nodes;
  const bool processes_kept = !in_place || add_in_place_account(events, replaced, v);
  if (island_left_out) {
    // DiLoCo: the lost island's weights since its last sync are gone and one sync averages fewer
    // pseudo-gradients (docs/diloco.md), so the run is another than the undisturbed one by design.
    v.checks.push_back(
        "final weights: not compared with the undisturbed run's: a DiLoCo island was left out of a sync");
    v.passed = v.detected_after && v.recovered_after && code == 0 && processes_kept;
    return v;
  }
  compare_weights(drill, v);
  v.passed = v.detected_after && v.recovered_after && code == 0 && processes_kept && v.weights_equal.value_or(false);
  return v;
}

// A straggler: node `--target` is stopped for 150 ms of every 200 ms from step `--at-step` to the
// end, so it runs at a quarter of its speed. It must be named, and the job must go on.
Verdict drill_slow_node(const Drill& drill) {
  const DrillOptions& options = drill.options();
  Verdict v;
  v.recovery_expected = false;
  auto run = drill.start("drilled", false, true);
  if (!run) {
    v.fault = run.error().message;
    return v;
  }
  EventFeed& feed = *run->events;
  // The node's process once the step is done, as drill_running_job takes it.
  const bool stepped = feed.wait_for(step_done(options.at_step), 300s).has_value();
  const std::optional<int> pid = stepped ? node_pid(feed, options.target()) : std::nullopt;
  if (!pid) {
    v.fault = "node " + std::to_string(options.target()) + " or step " + std::to_string(options.at_step) +
              " never appeared in the job's events";
    await_end(*run, v);
    return v;
  }
  const std::size_t from = feed.size();
  const double fault_at = now();
  v.fault = "node " + std::to_string(options.target()) + " (pid " + std::to_string(*pid) +
            ") stopped for 150 ms of every 200 ms from step " + std::to_string(options.at_step) + " on";
  std::atomic<bool> slowing{true};
  std::thread throttle([&] {
    while (slowing) {
      ::kill(*pid, SIGSTOP);
      std::this_thread::sleep_for(150ms);
      ::kill(*pid, SIGCONT);
      std::this_thread::sleep_for(50ms);
    }
  });
  // The slowed node must be the one named: another rank named first (one that writes the
  // checkpoints on a busy machine, say) does not count, and is listed below.
  const int target = options.target();
  const auto named = feed.wait_for(
      body_is<actors::straggler_named>([target](const actors::straggler_named& s) { return s.node == target; }), 300s,
      from);
  const std::optional<int> code = await_end(*run, v);
  slowing = false;
  throttle.join();
  ::kill(*pid, SIGCONT);
  std::string others;
  const std::vector<actors::job_event> events = feed.events();
  for (std::size_t i = from; i < events.size(); ++i)
    if (const auto* s = caf::get_if<actors::straggler_named>(&events[i].body); s && s->node != target)
      others += (others.empty() ? "" : ", ") + std::string("rank ") + std::to_string(s->rank) + " (node " +
                std::to_string(s->node) + ")";
  if (!others.empty())
    v.checks.push_back("also named a straggler while node " + std::to_string(target) + " was slowed: " + others);
  if (named) {
    const auto& straggler = caf::get<actors::straggler_named>(named->body);
    v.detected_after = named->unix_seconds - fault_at;
    v.detected_by = "straggler: rank " + std::to_string(straggler.rank) + " (node " + std::to_string(straggler.node) +
                    ") keeps the others waiting: it was waiting for a message in " +
                    std::to_string(static_cast<int>(100 * straggler.waiting_share)) +
                    "% of its recent heartbeats, every other rank in " +
                    std::to_string(static_cast<int>(100 * straggler.others_waiting_share)) + "% or more";
  }
  v.checks.push_back("the job went on to the end: " + std::string(code == 0 ? "yes" : "NO"));
  compare_weights(drill, v);
  v.passed = v.detected_after && code == 0 && v.weights_equal.value_or(false);
  return v;
}

// The shell's drain of a node after --at-step (the job restarts without it: one replica fewer, the
// same global batch), two steps on the nodes left, then the shell's rejoin: the node joins the
// running job in place where it can, the survivors keeping their processes, else every node
// restarts with it; either way it ends with an undisturbed run's weights where the shrink keeps them.
Verdict drill_grow(const Drill& drill) {
  const int node = drill.options().target();
  Verdict v;
  auto run = drill.start("drilled", false, true);
  if (!run) {
    v.fault = run.error().message;
    return v;
  }
  EventFeed& feed = *run->events;
  if (!feed.wait_for(step_done(drill.options().at_step), 300s)) {
    v.fault = "step " + std::to_string(drill.options().at_step) + " never appeared in the job's events";
    await_end(*run, v);
    return v;
  }
  Expected<std::string> drained = feed.order("drain node " + std::to_string(node));
  if (!drained) {
    v.fault = drained.error().message;
    await_end(*run, v);
    return v;
  }
  std::size_t shrunk_at = 0, resumed_at = 0;
  const auto shrunk = feed.wait_for(body_is<actors::layout_changed>([](const auto& layout) {
                                      return layout.route == actors::RecoveryRoute::shrink;
                                    }),
                                    120s, 0, &shrunk_at);
  const bool shrank = shrunk.has_value();
  bool two_to_one = false;
  if (shrunk) {
    const auto& layout = caf::get<actors::layout_changed>(shrunk->body);
    two_to_one = layout.replicas_before == 2 && layout.replicas_after == 1 && layout.per_replica_key == "train.grad_accum";
  }
  const auto resumed = feed.wait_for(body_is<actors::training_resumed>(), 120s, shrunk_at, &resumed_at);
  const long after = resumed ? static_cast<long>(caf::get<actors::training_resumed>(resumed->body).after_step) : 0;
  if (!resumed || !feed.wait_for(step_done(after + 2), 300s, resumed_at)) {
    v.fault = "drain node " + std::to_string(node) + ": the job did not train on without it (" + drained.value() + ")";
    return v;
  }
  // The nodes left, and the processes they run now: a grow in place keeps them.
  const std::map<int, std::vector<int>> before = joined_pids(feed.events());
  const std::size_t rejoin_index = feed.size();
  const double rejoin_at = now();
  Expected<std::string> rejoined = feed.order("rejoin");
  v.fault = "drain node " + std::to_string(node) + " after step " + std::to_string(drill.options().at_step) +
            ", two steps without it, then rejoin";
  if (!rejoined) {
    v.checks.push_back("rejoin: " + rejoined.error().message);
    return v;
  }
  std::size_t grow_at = 0, grown_at = 0;
  bool in_place = false;
  if (const auto chosen = feed.wait_for(body_is<actors::recovery_chosen>([](const auto& c) {
                                          return c.route == actors::RecoveryRoute::grow_in_place ||
                                                 c.route == actors::RecoveryRoute::grow_by_restart;
                                        }),
                                        120s, rejoin_index, &grow_at)) {
    const auto& how = caf::get<actors::recovery_chosen>(chosen->body);
    in_place = how.route == actors::RecoveryRoute::grow_in_place;
    v.detected_after = chosen->unix_seconds - rejoin_at;
    v.detected_by = said(how);
  }
  if (const auto grown = feed.wait_for(body_is<actors::training_resumed>(), 180s, grow_at, &grown_at)) {
    v.resumed_after = grown->unix_seconds - rejoin_at;
    if (const auto stepped = feed.wait_for(body_is<actors::step_trained>(), 180s, grown_at)) {
      v.recovered_after = stepped->unix_seconds - rejoin_at;
      v.recovered_how = std::string(in_place ? "node " + std::to_string(node) + " joined the running job"
                                             : "every node restarted with node " + std::to_string(node)) +
                        ", and the grown job trained a step";
    }
  }
  const std::optional<int> code = await_end(*run, v);
  const std::vector<job_event> events = feed.final_events(30s);
  v.checks.push_back("the job went on without node " + std::to_string(node) + ": " + (shrank ? "yes" : "NO"));
  v.checks.push_back("grown in place: " + (in_place ? std::string("yes") : "no (" + v.detected_by + ")"));
  bool kept = true;
  if (in_place) {
    const std::map<int, std::vector<int>> after_grow = joined_pids(events);
    std::string pids;
    for (const auto& [index, seen] : before) {
      if (index == node) continue;
      const auto grown_pids = after_grow.find(index);
      const bool same = grown_pids != after_grow.end() && grown_pids->second == seen;
      kept = kept && same;
      pids += (pids.empty() ? "node " : ", node ") + std::to_string(index) + " pid " + std::to_string(seen.back());
      // Every process the events named for the node, so a changed one can be read.
      if (!same)
        pids +=
            fmt::format(" (joined as {} before the grow, as {} after it)", fmt::join(seen, " then "),
                        grown_pids == after_grow.end() ? std::string("nothing")
                                                       : fmt::format("{}", fmt::join(grown_pids->second, " then ")));
    }
    v.checks.push_back("survivors kept their processes through the grow: " + std::string(kept ? "yes (" : "NO (") +
                       pids + ")");
    for (const job_event& event : events)
      if (const auto* moved = caf::get_if<actors::state_moved>(&event.body);
          moved && moved->route == actors::RecoveryRoute::grow_in_place)
        v.checks.push_back("state moved over the data plane: " + std::to_string(moved->bytes) + " bytes from rank " +
                           std::to_string(moved->donors.empty() ? -1 : moved->donors.front()));
  }
  v.checks.push_back("job finished: " + finished(code));
  const bool equal_expected = shrink_keeps_weights(drill, two_to_one, v);
  v.passed = shrank && v.recovered_after && kept && code == 0 && (!equal_expected || v.weights_equal.value_or(false));
  return v;
}

}  // namespace troupe::apps::drill
