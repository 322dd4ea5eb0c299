// troupe launch / troupe train --workers N: the job process. It publishes the job supervisor,
// starts one `troupe node` per host-file line through the node launcher, and ends when the job
// does: every node done, a node failed or lost (named), nodes that never joined, or Ctrl-C.
// With checkpoint.dir set, a failed or lost node restarts every node from the newest checkpoint
// instead, up to fault.max_restarts times.
//
// Each node is started with the resolved configuration spelled out as overrides, so its config
// hash equals the job's; a node started by hand with another config is rejected at join.


#include <cmath>
#include <cstdio>
#include <future>

#include "actors/actor_system_setup.hpp"
#include "actors/job_supervisor.hpp"
#include "apps/commands.hpp"
#include "apps/config_keys.hpp"
#include "apps/config_value.hpp"
#include "apps/job_identity.hpp"
#include "apps/launch/host_file.hpp"
#include "apps/launch/local_host.hpp"
#include "apps/launch/node_launcher.hpp"
#include "apps/launch/rank_plan.hpp"
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

Expected<std::vector<launch::HostEntry>> job_hosts(const LaunchArgs& args) {
  if (args.workers > 0) return std::vector<launch::HostEntry>(static_cast<std::size_t>(args.workers), {"localhost", 1, 0});
  return launch::parse_host_file(args.host_file);
}

}  // namespace

namespace {

// How one attempt at the job ended: the exit code and one line, and whether restarting every node
// from the newest checkpoint could help (a node failed or was lost; not bad input or Ctrl-C).
struct AttemptOutcome {
  int exit_code = 0;
  std::string reason;
  bool restartable = false;
};

AttemptOutcome run_attempt(const LaunchArgs& args, const JobConfig& config, const launch::RankPlan& plan,
                           const launch::LauncherOptions& launcher_options, const std::string& token, bool reuse_port) {
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
  auto port = system.middleman().publish(supervisor, static_cast<std::uint16_t>(args.port), args.bind.c_str(),
                                         reuse_port);
  if (!port) {
    caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
    return {2, "cannot listen on " + args.bind + ":" + std::to_string(args.port) + ": " + to_string(port.error()),
            false};
  }
  monitor::logger("job")->info("job supervisor on {}:{}; starting {} node process(es), {} rank(s)", args.bind, *port,
                               plan.nodes.size(), plan.world_size);

  launcher = std::make_unique<launch::NodeLauncher>(
      launch::node_commands(plan, {args.bind, *port, token}, node_argv(config)), launcher_options);
  launch::JobResult result = launcher->run();
  caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
  // A failed or lost node is named by the supervisor, usually before the launcher returns.
  const bool supervisor_knows = result.end == launch::JobEnd::success || result.end == launch::JobEnd::node_failed;
  if (supervisor_knows && outcome.wait_for(std::chrono::seconds(3)) == std::future_status::ready) {
    actors::job_outcome_msg o = outcome.get();
    if (o.exit_code != 0) return {o.exit_code, o.reason, o.exit_code == 1};
  }
  if (result.end != launch::JobEnd::success)
    return {launch::exit_code(result.end), result.message, result.end == launch::JobEnd::node_failed};
  return {};
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
  const launch::RankPlan plan = launch::plan_ranks(*hosts, launch::this_host_name());
  if (const int stages = job.config.pipeline.stages; plan.world_size % stages != 0)
    return fail("pipeline.stages " + std::to_string(stages) + " does not divide the job's " +
                    std::to_string(plan.world_size) + " workers (workers = data-parallel replicas x stages)",
                2);

  // Recovery, for now: when a node fails or is lost, every node restarts from the newest
  // checkpoint (the data position and optimizer state with it), up to fault.max_restarts times.
  JobConfig config = job.config;
  const bool can_restart = !config.checkpoint.dir.empty();
  auto log = monitor::logger("job");
  for (int restarts = 0;; ++restarts) {
    const AttemptOutcome attempt = run_attempt(args, config, plan, launcher_options, *token, restarts > 0);
    if (attempt.exit_code == 0) {
      if (restarts > 0) log->info("job finished after {} restart(s)", restarts);
      return 0;
    }
    if (!attempt.restartable || !can_restart || restarts >= config.fault.max_restarts) {
      std::string reason = attempt.reason;
      if (attempt.restartable && !can_restart && config.fault.max_restarts > 0)
        log->warn("not restarting: no checkpoint.dir to restart from");
      if (attempt.restartable && can_restart) reason += " (after " + std::to_string(restarts) + " restart(s))";
      return fail(reason, attempt.exit_code);
    }
    log->warn("restarting every node from the newest checkpoint in {} (restart {} of {}) after: {}",
              config.checkpoint.dir, restarts + 1, config.fault.max_restarts, attempt.reason);
    config.checkpoint.resume = true;
  }
}

}  // namespace troupe::apps
