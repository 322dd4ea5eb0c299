// troupe launch / troupe train --workers N: the job process. It publishes the job supervisor,
// starts one `troupe node` per host-file line through the node launcher, and ends when the job
// does: every node done, a node failed or lost (named), nodes that never joined, or Ctrl-C.
// With checkpoint.dir set, a failed or lost node restarts every node from the newest checkpoint
// instead — a rescue snapshot of the survivors' memory when they could write one — up to
// fault.max_restarts times, and with fault.elastic the job shrinks rather than stop.
//
// Each node is started with the resolved configuration spelled out as overrides, so its config
// hash equals the job's; a node started by hand with another config is rejected at join.


#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <future>
#include <memory>
#include <optional>

#include "actors/actor_system_setup.hpp"
#include "actors/monitor/frame_guard.hpp"
#include "actors/supervision/job_supervisor.hpp"
#include "apps/commands/commands.hpp"
#include "apps/config/keys.hpp"
#include "apps/config/value.hpp"
#include "actors/monitor/control_port.hpp"
#include "apps/commands/job_identity.hpp"
#include "apps/launch/host_file.hpp"
#include "apps/launch/local_host.hpp"
#include "apps/launch/node_launcher.hpp"
#include "apps/launch/rank_plan.hpp"
#include "actors/monitor/process_metrics.hpp"
#include "actors/supervision/failure_kind.hpp"
#include "actors/supervision/recovery_counts.hpp"
#include "monitor/log.hpp"

namespace troupe::apps {
namespace {

int fail(const std::string& message, int code) {
  std::fprintf(stderr, "troupe: error: %s\n", message.c_str());
  return code;
}

std::vector<std::string> node_argv(const JobConfig& config) {
  std::vector<std::string> argv{launch::this_executable(), "node"};
  // --key=value keeps a value that starts with '-' a value; an empty value must stand alone,
  // since CLI11 reads "--key=" as a key waiting for the next argument.
  for (const ConfigKey& key : config_keys()) {
    const std::string option = "--" + std::string(key.name), value = format_text(config, key);
    if (value.empty()) {
      argv.push_back(option);
      argv.push_back(value);
    } else {
      argv.push_back(option + "=" + value);
    }
  }
  return argv;
}

std::vector<bool> nodes_on_this_machine(const launch::RankPlan& plan) {
  std::vector<bool> local;
  for (const launch::NodePlan& node : plan.nodes) local.push_back(node.local);
  return local;
}

Expected<std::vector<launch::HostEntry>> job_hosts(const LaunchArgs& args) {
  if (args.workers > 0) return std::vector<launch::HostEntry>(static_cast<std::size_t>(args.workers), {"localhost", 1, 0});
  return launch::parse_host_file(args.host_file);
}

}  // namespace

namespace {

// How one attempt at the job ended: the exit code and one line, whether restarting could help (a
// node failed or was lost; not bad input or Ctrl-C), the kind of failure and the nodes to blame,
// the step of the rescue snapshot the survivors wrote (-1: none), and the nodes the job asked to
// leave out of the next attempt (drain).
struct AttemptOutcome {
  int exit_code = 0;
  std::string reason;
  bool restartable = false;
  std::optional<actors::FailureKind> failure_kind;  // none: the launcher gave none
  std::vector<int> failed_nodes;
  long rescued_step = -1;
  std::vector<int> drop_nodes;
};

// How long the launcher leaves the survivors of a node failure running before it stops them: long
// enough for the job supervisor's rescue snapshot, which ends the hold as soon as it is done.
constexpr auto rescue_timeout = std::chrono::seconds(60);

AttemptOutcome from_supervisor(actors::job_outcome_msg o) {
  AttemptOutcome a;
  a.exit_code = o.exit_code;
  a.reason = std::move(o.reason);
  a.restartable = o.exit_code == 1 || !o.drop_nodes.empty();
  a.failure_kind = actors::parse_failure_kind(o.failure_kind);
  a.failed_nodes = std::move(o.failed_nodes);
  a.rescued_step = o.rescued_step;
  a.drop_nodes = std::move(o.drop_nodes);
  return a;
}

AttemptOutcome run_attempt(const LaunchArgs& args, const JobConfig& config, const launch::RankPlan& plan,
                           launch::LauncherOptions launcher_options, const std::string& token,
                           const actors::RecoveryCounts& counts, bool rescue, actors::ControlPort& control) {
  auto milliseconds = [](double seconds) { return std::chrono::milliseconds(std::lround(seconds * 1000)); };
  actors::JobPlan job_plan{token,
                           build_id(),
                           config_hash(config),
                           {},
                           milliseconds(args.join_timeout),
                           milliseconds(config.fault.heartbeat_timeout),
                           milliseconds(config.fault.step_timeout),
                           config.pipeline.stages};
  for (const auto& node : plan.nodes) job_plan.nodes.push_back({node.node_index, node.host, node.slots, node.first_rank});
  if (rescue) job_plan.rescue_timeout = rescue_timeout;
  // Once the job runs, a node's exit may be answered by a rescue: the launcher holds the others
  // until the supervisor's outcome (stop_all) or the rescue's time is up. Before that, at once.
  auto started = std::make_shared<std::atomic<bool>>(false);
  job_plan.on_start = [started] { *started = true; };
  launcher_options.hold_after_failure = [started, rescue] {
    return rescue && *started ? std::chrono::milliseconds(rescue_timeout) + std::chrono::seconds(5)
                              : std::chrono::milliseconds(0);
  };

  actors::TroupeConfig cfg;
  caf::actor_system system{cfg};
  std::promise<actors::job_outcome_msg> outcome_promise;
  auto outcome = outcome_promise.get_future();
  std::unique_ptr<launch::NodeLauncher> launcher;
  auto listener = system.spawn([&](caf::event_based_actor* self) -> caf::behavior {
    return {[&, self](actors::done_atom, const actors::job_outcome_msg& o) {
      if (o.exit_code != 0 && launcher) launcher->stop_all(launch::JobEnd::node_failed, o.reason);
      outcome_promise.set_value(o);
      self->quit();
    }};
  });
  auto supervisor = actors::spawn_job_supervisor(system, std::move(job_plan), listener);
  // Nodes reach the supervisor through a frame guard (actors/monitor/frame_guard.hpp): CAF alone would
  // believe any payload length a peer announces. The guard's listener reuses the address.
  auto internal = system.middleman().publish(supervisor, 0, "127.0.0.1");
  auto guard = internal ? actors::FrameGuard::start({args.bind, static_cast<std::uint16_t>(args.port), *internal,
                                                     1u << 20, 4096,
                                                     [](const std::string& line) {
                                                       monitor::logger("job")->warn("job port: {}", line);
                                                     }})
                        : Expected<std::unique_ptr<actors::FrameGuard>>(Error{to_string(internal.error())});
  if (!guard) {
    caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
    AttemptOutcome failed;
    failed.exit_code = 2;
    failed.reason = "cannot listen on " + args.bind + ":" + std::to_string(args.port) + ": " + guard.error().message;
    return failed;
  }
  const int port = (*guard)->port();
  monitor::logger("job")->info("job supervisor on {}:{}; starting {} node process(es), {} rank(s)", args.bind, port,
                               plan.nodes.size(), plan.world_size);
  if (Status opened = control.open(system, supervisor, config, plan.world_size, nodes_on_this_machine(plan), counts.restarts); !opened) {
    caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
    AttemptOutcome failed;
    failed.exit_code = 2;
    failed.reason = opened.error().message;
    return failed;
  }

  std::vector<launch::NodeProcessSpec> commands = launch::node_process_specs(plan, {args.bind, port, token}, node_argv(config));
  for (launch::NodeProcessSpec& command : commands) command.env.emplace_back(actors::recovery_counts_variable, counts.to_text());
  launcher = std::make_unique<launch::NodeLauncher>(std::move(commands), launcher_options);
  launch::JobResult result = launcher->run();
  caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
  // A failed or lost node is named by the supervisor, usually before the launcher returns.
  const bool supervisor_knows = result.end == launch::JobEnd::success || result.end == launch::JobEnd::node_failed;
  if (supervisor_knows && outcome.wait_for(std::chrono::seconds(3)) == std::future_status::ready) {
    actors::job_outcome_msg o = outcome.get();
    // Before the start, a node that fails makes the launcher stop the others, and the supervisor
    // would blame the first of those to go: the launcher saw who failed first.
    const bool launcher_saw_first = !*started && result.end == launch::JobEnd::node_failed && o.exit_code == 1;
    if (!launcher_saw_first && (o.exit_code != 0 || !o.drop_nodes.empty())) return from_supervisor(std::move(o));
  }
  if (result.end != launch::JobEnd::success) {
    AttemptOutcome failed;
    failed.exit_code = launch::exit_code(result.end);
    failed.reason = result.message;
    failed.restartable = result.end == launch::JobEnd::node_failed;
    // The supervisor names every node that joined; one the launcher alone saw fail never did.
    if (result.end == launch::JobEnd::node_failed) failed.failure_kind = actors::FailureKind::start_failed;
    if (!result.exits.empty()) failed.failed_nodes.push_back(result.exits.front().node_index);
    return failed;
  }
  return {};
}

std::string node_list(const std::vector<int>& nodes, const std::vector<launch::HostEntry>& hosts) {
  std::string text;
  for (int n : nodes) {
    text += (text.empty() ? "node " : ", node ") + std::to_string(n);
    if (n >= 0 && n < static_cast<int>(hosts.size())) text += " (" + hosts[static_cast<std::size_t>(n)].host + ")";
  }
  return text;
}

// Leaves `drop` (node indices) out of `hosts` and keeps the global batch on the fewer data-parallel
// replicas that remain: more micro-batches per replica (gradient accumulation, or the pipeline's),
// else a larger per-replica batch. A checkpoint refuses another global batch, so a shrink that
// cannot keep it is an error.
Status shrink(std::vector<launch::HostEntry>& hosts, JobConfig& config, const std::vector<int>& drop) {
  const int stages = config.pipeline.stages;
  int old_world = 0, new_world = 0;
  std::vector<launch::HostEntry> kept;
  for (std::size_t i = 0; i < hosts.size(); ++i) {
    old_world += hosts[i].slots;
    if (std::find(drop.begin(), drop.end(), static_cast<int>(i)) != drop.end()) continue;
    kept.push_back(hosts[i]);
    new_world += hosts[i].slots;
  }
  if (new_world == 0) return Error{"no node would be left"};
  if (new_world % stages != 0)
    return Error{std::to_string(new_world) + " workers would be left, which pipeline.stages " + std::to_string(stages) +
                 " does not divide"};
  const int old_dp = old_world / stages, new_dp = new_world / stages;
  int& per_replica = stages > 1 ? config.pipeline.microbatches : config.train.grad_accum;
  const char* per_replica_key = stages > 1 ? "pipeline.microbatches" : "train.grad_accum";
  auto log = monitor::logger("job");
  if (per_replica * old_dp % new_dp == 0) {
    per_replica = per_replica * old_dp / new_dp;
    log->info("shrinking from {} to {} data-parallel replica(s): {} = {} keeps the global batch", old_dp, new_dp,
              per_replica_key, per_replica);
  } else if (config.train.batch_size * old_dp % new_dp == 0) {
    config.train.batch_size = config.train.batch_size * old_dp / new_dp;
    log->info("shrinking from {} to {} data-parallel replica(s): train.batch_size = {} keeps the global batch", old_dp,
              new_dp, config.train.batch_size);
  } else {
    return Error{"the global batch (" + std::to_string(old_dp) + " replicas x train.batch_size " +
                 std::to_string(config.train.batch_size) + " x " + per_replica_key + " " + std::to_string(per_replica) +
                 ") cannot be split over " + std::to_string(new_dp) + " replicas"};
  }
  hosts = std::move(kept);
  return Status::success();
}

}  // namespace

int run_launch(const LaunchArgs& args, const ResolvedJob& job) {
  monitor::set_identity(-1, "job");
  auto hosts = job_hosts(args);
  if (!hosts) return fail(hosts.error().message, 2);
  launch::LauncherOptions launcher_options;
  if (!args.launcher.empty()) {
    auto parsed = launch::LaunchTemplate::parse(args.launcher);
    if (!parsed) return fail(parsed.error().message, 2);
    launcher_options.remote = *parsed;
  }
  auto token = new_job_token();
  if (!token) return fail(token.error().message, 1);
  monitor::set_log_job(actors::metrics_job_label(*token));  // the label the nodes' lines and metrics carry
  actors::ControlPort control(job.config.monitor, *token);
  launch::RankPlan plan = launch::plan_ranks(*hosts, launch::this_host_name());
  if (const int stages = job.config.pipeline.stages; plan.world_size % stages != 0)
    return fail("pipeline.stages " + std::to_string(stages) + " does not divide the job's " +
                    std::to_string(plan.world_size) + " workers (workers = data-parallel replicas x stages)",
                2);

  // Recovery (docs/architecture.md, "Failures"): when a node fails or is lost, the survivors write
  // their memory of the last completed step as a checkpoint when every pipeline stage has a
  // surviving replica (plain data parallel or a pipeline on the CPU backend, not ZeRO, whose
  // optimizer state is sharded), and every node restarts from the newest checkpoint, up to fault.max_restarts times.
  // A node that cannot come back, or a spent budget, ends the job unless fault.elastic lets it
  // shrink; a node the job asks to drop is left out at once.
  JobConfig config = job.config;
  const bool can_restart = !config.checkpoint.dir.empty();
  auto log = monitor::logger("job");
  actors::RecoveryCounts counts;
  int budget_used = 0;
  for (;;) {
    const bool rescue = can_restart && config.train.zero == 0 && config.train.backend == "cpu" &&
                        plan.world_size / config.pipeline.stages > 1;
    const AttemptOutcome attempt = run_attempt(args, config, plan, launcher_options, *token, counts, rescue, control);
    control.attempt_ended(attempt.reason);
    if (attempt.exit_code == 0 && attempt.drop_nodes.empty()) {
      if (counts.restarts > 0) log->info("job finished after {} restart(s); {}", counts.restarts, counts.to_text());
      return 0;
    }
    using actors::FailureKind;
    const FailureKind kind = attempt.failure_kind         ? *attempt.failure_kind
                             : attempt.drop_nodes.empty() ? FailureKind::node_exit
                                                          : FailureKind::drained;
    // Nodes that never join are bad input at first, but after a restart one of ours did not come back.
    const bool restartable = attempt.restartable || (kind == FailureKind::join_timeout && counts.restarts > 0);
    if (restartable) ++counts.failures[kind];
    // A node that fails again before joining, after a restart, will not come back by restarting.
    const bool cannot_come_back = counts.restarts > 0 &&
                                  (kind == FailureKind::start_failed || kind == FailureKind::join_timeout) &&
                                  !attempt.failed_nodes.empty();
    const bool budget_left = budget_used < config.fault.max_restarts;
    std::vector<int> drop = attempt.drop_nodes;
    std::string why_dropped = "the job asked to drop it";
    if (drop.empty() && restartable && config.fault.elastic && (cannot_come_back || !budget_left)) {
      drop = attempt.failed_nodes;
      why_dropped = cannot_come_back ? "it cannot come back" : "the restart budget is spent";
    }
    const std::string failure = "failure " + std::to_string(counts.restarts + 1) + " (" +
                                std::string(to_string(kind)) + ")" +
                                (attempt.failed_nodes.empty() ? "" : " of " + node_list(attempt.failed_nodes, *hosts)) +
                                ": " + attempt.reason;
    if (!restartable || !can_restart || (drop.empty() && (!budget_left || cannot_come_back))) {
      std::string reason = attempt.reason;
      if (restartable && !can_restart && config.fault.max_restarts > 0)
        log->warn("not restarting: no checkpoint.dir to restart from");
      if (restartable && can_restart) {
        reason += " (after " + std::to_string(counts.restarts) + " restart(s)";
        if (cannot_come_back) reason += "; " + node_list(attempt.failed_nodes, *hosts) + " cannot come back";
        reason += config.fault.elastic ? ")" : "; fault.elastic is off)";
        log->error("{}; stopping the job: {}", failure, counts.to_text());
      }
      return fail(reason, attempt.exit_code);
    }
    actors::RecoverySource source;
    if (!drop.empty()) {
      const std::string dropped = node_list(drop, *hosts);
      if (Status shrunk = shrink(*hosts, config, drop); !shrunk)
        return fail(attempt.reason + "; cannot go on without " + dropped + ": " + shrunk.error().message,
                    std::max(attempt.exit_code, 1));
      plan = launch::plan_ranks(*hosts, launch::this_host_name());
      source = actors::RecoverySource::shrink;
      log->warn("{}; recovery: restarting every node without {} ({}), {} node(s) left, from the newest checkpoint in {}",
                failure, dropped, why_dropped, hosts->size(), config.checkpoint.dir);
    } else {
      ++budget_used;
      source = attempt.rescued_step >= 0 ? actors::RecoverySource::replica : actors::RecoverySource::checkpoint;
      std::string from = "the newest checkpoint";
      if (attempt.rescued_step >= 0)
        from = "the survivors' rescue snapshot of step " + std::to_string(attempt.rescued_step) + " (no steps lost)";
      else if (config.train.zero > 0)
        from += " (no rescue: train.zero " + std::to_string(config.train.zero) + " shards the optimizer state)";
      else if (config.train.backend != "cpu")
        from += " (no rescue: the state is in GPU memory, behind a stream an aborted NCCL communicator may block)";
      else if (plan.world_size / config.pipeline.stages < 2)
        from += " (no rescue: a single data-parallel replica)";
      log->warn("{}; recovery: restarting every node from {} in {} (restart {} of {})", failure, from,
                config.checkpoint.dir, budget_used, config.fault.max_restarts);
    }
    ++counts.recoveries[source];
    ++counts.restarts;
    config.checkpoint.resume = true;
  }
}

}  // namespace troupe::apps
