#include "actors/supervision/attempt.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <future>
#include <memory>
#include <mutex>
#include <thread>

#include "actors/actor_system_setup.hpp"
#include "actors/control/frame_guard.hpp"
#include "actors/local_messages.hpp"
#include "actors/process_environment.hpp"
#include "actors/supervision/recovery_path.hpp"
#include "actors/supervision/rescue_timing.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {
namespace {

std::chrono::milliseconds milliseconds(double seconds) {
  return std::chrono::milliseconds(std::lround(seconds * 1000));
}

// How long an attempt's end waits for the job's event readers (a drill) to read the runner's word
// on it, while this attempt's monitor still answers them.
constexpr std::chrono::milliseconds reader_patience{2000};

// For each of `nodes` in turn, the first free spare with as many slots as it has or more: the
// spares' hosts, in that order, taken; or none taken and why, naming the first node left without.
Expected<std::vector<std::string>> take_spares(SpareLines& spares, const std::vector<int>& nodes,
                                               const std::vector<NodeShape>& lines) {
  SpareLines after = spares;
  std::vector<std::string> hosts;
  for (int index : nodes) {
    const NodeShape& node = lines.at(static_cast<std::size_t>(index));
    const auto fits = std::find_if(after.free.begin(), after.free.end(),
                                   [&](const NodeShape& spare) { return spare.slots >= node.slots; });
    if (fits == after.free.end())
      return Error{"node " + std::to_string(index) + "'s host " + node.host +
                   " is unreachable and the host file has no spare line left with " + std::to_string(node.slots) +
                   " slot(s)" +
                   (nodes.size() > 1 ? " (" + std::to_string(nodes.size()) + " nodes of that host need one each)" : "")};
    hosts.push_back(fits->host);
    after.taken.emplace_back(index, *fits);
    after.free.erase(fits);
  }
  spares = std::move(after);
  return hosts;
}

int world_size(const std::vector<PlacedNode>& nodes) {
  int world = 0;
  for (const PlacedNode& node : nodes) world += node.slots;
  return world;
}

// A node's process is started again in place: the variables it starts with. Its counters begin
// with this attempt's in-place recoveries, its own included (TROUPE_RESTARTS); the lost process's
// MFU basis comes along (a spare line is the same kind of machine).
NodeEnvironment restarted_environment(const RecoveryCounts& counts, const std::vector<FailureKind>& in_place,
                                      int attempt, std::int64_t peak_flops) {
  RecoveryCounts seen = counts;
  for (FailureKind kind : in_place) {
    ++seen.failures[kind];
    ++seen.recoveries[RecoverySource::in_place];
  }
  NodeEnvironment env{{recovery_counts_variable, seen.to_text()}, {env::attempt.name, std::to_string(attempt)}};
  if (peak_flops > 0) env.emplace_back(env::peak_flops.name, std::to_string(peak_flops));
  return env;
}

AttemptOutcome failed_to_open(std::string reason) {
  AttemptOutcome failed;
  failed.exit_code = 2;
  failed.reason = std::move(reason);
  return failed;
}

// The attempt's end as the starter saw it, where the supervisor did not name a failure first.
AttemptOutcome starter_outcome(const NodesOutcome& nodes) {
  AttemptOutcome failed;
  if (nodes.end == NodesEnd::success) return failed;
  failed.exit_code = nodes.exit_code;
  failed.reason = nodes.message;
  failed.restartable = nodes.end == NodesEnd::node_failed;
  // The supervisor names every node that joined; one the starter alone saw fail never did.
  if (nodes.end == NodesEnd::node_failed) failed.failure_kind = FailureKind::start_failed;
  if (nodes.first_ended >= 0) failed.failed_nodes.push_back(nodes.first_ended);
  return failed;
}

// While an attempt's actor system lives, and ended before it: launch may give orders to the
// attempt's monitor (ControlPort::order).
class OpenMonitor {
 public:
  explicit OpenMonitor(ControlPort& control) : control_(control) {}
  ~OpenMonitor() { control_.forget_monitor(); }
  OpenMonitor(const OpenMonitor&) = delete;
  OpenMonitor& operator=(const OpenMonitor&) = delete;

 private:
  ControlPort& control_;
};

}  // namespace

AttemptOutcome run_attempt(const JobContactOptions& contact, const AttemptSetup& setup, int& attempt,
                           NodeStarter* starter, SpareLines& spares, ControlPort& control, JobEvents& events,
                           const AttemptHooks& hooks) {
  const JobConfig& config = setup.config;
  const auto finish = [&](AttemptOutcome outcome) {
    if (hooks.ended) hooks.ended(outcome);
    return outcome;
  };
  std::vector<PlacedNode> placed;
  if (starter) {
    placed = starter->place(setup.lines);
  } else {
    int first_rank = 0;
    for (std::size_t i = 0; i < setup.lines.size(); ++i) {
      placed.push_back({static_cast<int>(i), setup.lines[i].host, setup.lines[i].slots, first_rank, false});
      first_rank += setup.lines[i].slots;
    }
  }
  const RescueTiming timing = rescue_timing(config.fault);
  JobPlan job_plan{contact.token,
                   contact.build_id,
                   contact.config_hash(config),
                   {},
                   contact.join_timeout,
                   milliseconds(config.fault.heartbeat_timeout),
                   milliseconds(config.fault.step_timeout),
                   config.pipeline.stages,
                   config.tensor.shards};
  for (const PlacedNode& node : placed) job_plan.nodes.push_back({node.node_index, node.host, node.slots, node.first_rank});
  const bool rescue = rescue_choice(setup.recovery).allowed;
  if (rescue) job_plan.rescue_timeout = timing.job_wait;
  job_plan.last_step = config.train.steps;
  job_plan.recovery = setup.recovery;
  job_plan.recovery_timeout = milliseconds(config.fault.rescue_timeout);
  job_plan.attempt = attempt;
  job_plan.events = &events;
  job_plan.start_route = setup.start_route;
  // The supervisor asks on its own thread; the lines of an unreachable node moved to a spare change.
  std::mutex lines_mutex;
  std::vector<NodeShape> lines = setup.lines;
  if (job_plan.recovery.replaces_nodes)
    job_plan.replace_nodes = [&, starter](const std::vector<NodeToReplace>& nodes, int new_attempt,
                                          const std::vector<FailureKind>& in_place) {
      std::lock_guard lock(lines_mutex);
      const bool to_spare = in_place.back() == FailureKind::unreachable;
      std::vector<std::string> spare_hosts;
      if (to_spare) {
        std::vector<int> indices;
        for (const NodeToReplace& node : nodes) indices.push_back(node.node_index);
        Expected<std::vector<std::string>> taken = take_spares(spares, indices, lines);
        if (!taken) return NodeReplacements{{}, taken.error().message};
        spare_hosts = std::move(*taken);
      }
      attempt = new_attempt;
      NodeReplacements started;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        NodeEnvironment env = restarted_environment(setup.counts, in_place, new_attempt, nodes[i].peak_flops);
        NodeShape& line = lines.at(static_cast<std::size_t>(nodes[i].node_index));
        if (to_spare) {
          line.host = spare_hosts[i];
          starter->move(nodes[i].node_index, line.host, std::move(env));
        } else {
          starter->start_again(nodes[i].node_index, std::move(env));
        }
        started.nodes.push_back({nodes[i].node_index, line.host, to_spare});
      }
      return started;
    };
  if (hooks.grow_nodes)
    job_plan.grow_nodes = [&](int new_attempt) {
      GrownNodes grown = hooks.grow_nodes(new_attempt);
      if (!grown.why_not.empty()) return grown;
      attempt = new_attempt;
      // A node that joined the attempt may be lost in its turn: its line is the attempt's.
      std::lock_guard lock(lines_mutex);
      for (const PlannedNode& node : grown.nodes) lines.push_back({node.host, node.slots});
      return grown;
    };
  job_plan.grew = hooks.grew;
  if (starter) job_plan.stop_nodes = [starter](const std::string& reason) { starter->stop_all(reason); };
  const bool replaces = choose_recovery(job_plan.recovery, FailureKind::node_lost).in_place;
  // Once the job runs, a node's exit may be answered by a rescue or by starting that node again in
  // place: the starter holds the others until the supervisor's outcome (stop_all), its
  // start_again() or the rescue's time is up. Before that, at once.
  auto started = std::make_shared<std::atomic<bool>>(false);
  job_plan.on_start = [started] { *started = true; };

  TroupeConfig cfg;
  beat_connections(cfg, config.fault, false);
  caf::actor_system system{cfg};
  std::promise<job_outcome_msg> outcome_promise;
  auto outcome = outcome_promise.get_future();
  auto listener = system.spawn([&](caf::event_based_actor* self) -> caf::behavior {
    return {[&, self](done_atom, const job_outcome_msg& o) {
      if (o.exit_code != 0 && starter) starter->stop_all(o.reason);
      outcome_promise.set_value(o);
      self->quit();
    }};
  });
  auto supervisor = spawn_job_supervisor(system, std::move(job_plan), listener);
  // Nodes reach the supervisor through a frame guard (actors/control/frame_guard.hpp): CAF alone
  // would believe any payload length a peer announces. The guard's listener reuses the address.
  auto internal = system.middleman().publish(supervisor, 0, "127.0.0.1");
  const std::uint16_t internal_port = internal ? *internal : 0;
  FrameGuardOptions guard_options{contact.bind, static_cast<std::uint16_t>(contact.port), internal_port, 1u << 20, 4096,
                                  [](const std::string& line) { monitor::logger("job")->warn("job port: {}", line); },
                                  // the node processes of one host may join at once
                                  64, 32};
  // A node's host that stops answering is named before its silence reaches fault.heartbeat_timeout.
  guard_options.unreachable_after = milliseconds(config.fault.heartbeat_timeout / 2);
  guard_options.unreachable = [supervisor](const std::string& address, double seconds) {
    caf::anon_send(supervisor, unreachable_atom_v, address, seconds);
  };
  auto guard = internal ? FrameGuard::start(std::move(guard_options))
                        : Expected<std::unique_ptr<FrameGuard>>(Error{to_string(internal.error())});
  if (!guard) {
    caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
    return finish(failed_to_open("cannot listen on " + contact.bind + ":" + std::to_string(contact.port) + ": " +
                                 guard.error().message));
  }
  const int job_port = (*guard)->port();
  if (!starter)
    monitor::logger("job")->info(
        "job supervisor on {}:{}; waiting up to {} s for {} node process(es) started by srun, torchrun or by hand, "
        "one rank each",
        contact.bind, job_port, contact.join_timeout.count() / 1000.0, placed.size());
  else
    monitor::logger("job")->info("job supervisor on {}:{}; starting {} node process(es), {} rank(s)", contact.bind,
                                 job_port, placed.size(), world_size(placed));
  if (Status opened = control.open(system, supervisor, config, world_size(placed), nodes_on_this_machine(placed),
                                   replaces, setup.attempts_before, setup.counts.restarts);
      !opened) {
    caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
    return finish(failed_to_open(opened.error().message));
  }
  const OpenMonitor monitor_open(control);
  // The attempt's end: the runner's word on it goes out while this attempt's monitor still answers
  // the job's event readers (it outlives the supervisor while there are any), who get a moment to
  // read it.
  const auto end_attempt = [&](AttemptOutcome ended) {
    caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
    ended = finish(std::move(ended));
    events.wait_read(events.last_seq(), reader_patience);
    return ended;
  };
  if (!starter) {
    // Nothing to start or watch here: the supervisor's join deadline and heartbeat watch end it.
    job_outcome_msg o = outcome.get();
    // The nodes take their stop from this process: it stays until they have hung up, at most
    // fault.heartbeat_timeout, after which a node that heard nothing stops by itself.
    const auto linger_until = std::chrono::steady_clock::now() + milliseconds(config.fault.heartbeat_timeout);
    while ((*guard)->connections() > 0 && std::chrono::steady_clock::now() < linger_until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    return end_attempt(attempt_outcome(o));
  }

  AttemptNodes nodes{setup.lines, config, contact.bind, job_port, contact.token,
                     {{recovery_counts_variable, setup.counts.to_text()}, {env::attempt.name, std::to_string(attempt)}}};
  nodes.hold_after_failure = [started, rescue, replaces, hold = timing.launcher_hold] {
    return (rescue || replaces) && *started ? hold : std::chrono::milliseconds(0);
  };
  nodes.restarted_exited = [supervisor](int node_index, int pid, const std::string& how) {
    caf::anon_send(supervisor, recover_atom_v, node_index, pid, how);
  };
  // Answered before the starter signals any node, so that no node's exit reaches the supervisor first.
  nodes.stopping_at_signal = [&system, supervisor](const std::string& why) {
    caf::scoped_actor self{system};
    self->request(supervisor, std::chrono::seconds(1), stop_atom_v, why).receive([] {}, [](const caf::error&) {});
  };
  const NodesOutcome result = starter->run(std::move(nodes));
  caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
  // A failed or lost node is named by the supervisor, usually before the starter returns.
  const bool supervisor_knows = result.end == NodesEnd::success || result.end == NodesEnd::node_failed;
  if (supervisor_knows && outcome.wait_for(std::chrono::seconds(3)) == std::future_status::ready) {
    const job_outcome_msg o = outcome.get();
    // Before the start, a node that fails makes the starter stop the others, and the supervisor
    // would blame the first of those to go: the starter saw who failed first. A node that died
    // after every rank finished training leaves a finished job, whatever its exit status says.
    const bool starter_saw_first = !*started && result.end == NodesEnd::node_failed && o.exit_code == 1;
    if (!starter_saw_first) return end_attempt(attempt_outcome(o));
  }
  return end_attempt(starter_outcome(result));
}

}  // namespace troupe::actors
