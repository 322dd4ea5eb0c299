// troupe launch / troupe train --workers N: the job process. It publishes the job supervisor,
// starts one `troupe node` per host-file line through the node launcher, and ends when the job
// does: every node done, a node failed or lost (named), nodes that never joined, or Ctrl-C.
// With checkpoint.dir set, a failed or lost node restarts every node from the newest checkpoint
// instead — a rescue snapshot of the survivors' memory when they could write one — up to
// fault.max_restarts times, and with fault.elastic the job shrinks rather than stop.
// With --external N it starts no node: N one-rank nodes that srun, torchrun or a person started
// join it (rank 0's `troupe node` runs it so under srun and torchrun), and a failure ends the job.
//
// Each node is started with the resolved configuration spelled out as overrides, so its config
// hash equals the job's; a node started by hand with another config is rejected at join.


#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <cstdio>
#include <future>
#include <memory>
#include <numeric>
#include <set>
#include <string>
#include <thread>

#include "actors/actor_system_setup.hpp"
#include "actors/control/control_port.hpp"
#include "actors/control/frame_guard.hpp"
#include "actors/failure_kind.hpp"
#include "actors/local_messages.hpp"
#include "actors/process_environment.hpp"
#include "actors/process_metrics.hpp"
#include "actors/recovery_counts.hpp"
#include "actors/supervision/job_runner.hpp"
#include "actors/supervision/job_supervisor.hpp"
#include "actors/supervision/recovery_path.hpp"
#include "actors/supervision/rescue_timing.hpp"
#include "actors/supervision/restart_policy.hpp"
#include "actors/worker/job_data.hpp"
#include "apps/commands/checkpoint_folder_lock.hpp"
#include "apps/commands/commands.hpp"
#include "apps/commands/job_identity.hpp"
#include "apps/config/keys.hpp"
#include "apps/config/memory_fit.hpp"
#include "apps/config/value.hpp"
#include "apps/exit_codes.hpp"
#include "apps/launch/host_file.hpp"
#include "apps/launch/local_host.hpp"
#include "apps/launch/node_launcher.hpp"
#include "apps/launch/rank_plan.hpp"
#include "apps/launch/slurm_allocation.hpp"
#include "apps/launch/spare_watch.hpp"
#include "checkpoint/store.hpp"
#include "monitor/log.hpp"

namespace troupe::apps {
namespace {

std::vector<std::string> node_argv(const JobConfig& config) {
  std::vector<std::string> argv{launch::this_executable(), "node"};
  for (std::string& argument : override_arguments(config)) argv.push_back(std::move(argument));
  return argv;
}

std::vector<bool> nodes_on_this_machine(const launch::RankPlan& plan) {
  std::vector<bool> local;
  for (const launch::NodePlan& node : plan.nodes) local.push_back(node.local);
  return local;
}

Expected<launch::HostFile> job_hosts(const LaunchArgs& args) {
  if (args.workers > 0)
    return launch::HostFile{std::vector<launch::HostEntry>(static_cast<std::size_t>(args.workers), {"localhost", 1, 0}),
                            {}};
  return launch::read_host_file(args.host_file);
}

// The host file's spare lines not used yet, and the nodes moved to one: node index → its spare.
struct SpareHosts {
  std::vector<launch::HostEntry> free;
  std::vector<std::pair<int, launch::HostEntry>> taken;
};

// For each of `nodes` in turn, the first free spare with as many slots as it has or more: the
// spares' hosts, in that order, taken; or none taken and why, naming the first node left without.
Expected<std::vector<std::string>> take_spares(SpareHosts& spares, const std::vector<int>& nodes,
                                               const launch::RankPlan& plan) {
  SpareHosts after = spares;
  std::vector<std::string> hosts;
  for (int index : nodes) {
    const launch::NodePlan& node = plan.nodes.at(static_cast<std::size_t>(index));
    const auto fits = std::find_if(after.free.begin(), after.free.end(),
                                   [&](const launch::HostEntry& spare) { return spare.slots >= node.slots; });
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

// The machines the plan's nodes run on: its distinct hosts, every alias of this one counted once.
int machines(const launch::RankPlan& plan) {
  std::set<std::string> hosts;
  for (const launch::NodePlan& node : plan.nodes) hosts.insert(node.local ? std::string() : node.host);
  return std::max<int>(1, int(hosts.size()));
}

// What can be known on this machine before any node starts: its workers fit its cores, every
// rank's layout fits its memory (--memory-limit, else this machine's share), and, when a node runs here and so reads the same files, the data loads and fits the
// vocabulary (the error a node would report, said once and as bad input).
Status job_fits_this_machine(const LaunchArgs& args, const ResolvedJob& job, const launch::RankPlan& plan) {
  const std::string origin = args.workers > 0 ? "--workers " + std::to_string(args.workers) : args.host_file;
  if (Status grid = check_grid_divides(job, plan.world_size); !grid) return grid;
  if (Status cores = launch::check_local_workers(plan, std::thread::hardware_concurrency(), origin); !cores)
    return cores;
  const int here = launch::local_workers(plan);
  if (Status memory = check_memory_fit(job, {plan.world_size, machines(plan), here}, args.memory_limit); !memory)
    return memory;
  if (here == 0) return Status::success();
  auto data = actors::load_job_data(job);
  if (!data) return data.error();
  return Status::success();
}

using actors::AttemptOutcome;

// The host file's nodes (`configured`) that `running` leaves out, by index there.
std::vector<int> left_out_of(const std::vector<launch::HostEntry>& configured, const std::vector<int>& running) {
  std::vector<int> out;
  for (std::size_t i = 0; i < configured.size(); ++i)
    if (std::find(running.begin(), running.end(), static_cast<int>(i)) == running.end()) out.push_back(static_cast<int>(i));
  return out;
}

// "h1 slots=1": a node's host-file line, as the shell names a node left out.
std::string host_line(const launch::HostEntry& node) { return node.host + " slots=" + std::to_string(node.slots); }

// The job after the nodes it went on without come back while it runs (an in-place grow): its
// nodes (the running ones in their order, then those back, so that no running rank is numbered
// anew), which host-file node each one is, the host file's nodes (a node back on a new spare line
// moved there), the spare lines that brought them, its configuration (the batch split) and rank plan.
struct GrownLayout {
  std::vector<launch::HostEntry> hosts;
  std::vector<int> running;
  std::vector<launch::HostEntry> configured;
  std::vector<launch::HostEntry> new_spares;
  JobConfig config;
  launch::RankPlan plan;
};

// What an attempt needs to grow the running job in place, and what came of it: `plan` makes the
// grown layout (on the job supervisor's thread, while launch waits in the attempt), or says why
// there is none; `layout` is the one whose nodes were started, and `grown` is set once the job ran
// grown, so that a later attempt starts from it.
struct InPlaceGrowth {
  std::function<Expected<GrownLayout>()> plan;
  std::optional<GrownLayout> layout;
  std::atomic<bool> grown{false};
};

// While an attempt's actor system lives, and ended before it: the watch for new spare lines runs,
// and launch may give orders to the attempt's monitor.
class AttemptOrders {
 public:
  AttemptOrders(actors::ControlPort& control, launch::SpareWatch* watch) : control_(control), watch_(watch) {
    if (watch_) watch_->start();
  }
  ~AttemptOrders() {
    if (watch_) watch_->stop();
    control_.forget_monitor();
  }
  AttemptOrders(const AttemptOrders&) = delete;
  AttemptOrders& operator=(const AttemptOrders&) = delete;

 private:
  actors::ControlPort& control_;
  launch::SpareWatch* watch_;
};

AttemptOutcome run_attempt(const LaunchArgs& args, const JobConfig& config, launch::RankPlan plan,
                           launch::LauncherOptions launcher_options, SpareHosts& spares, int& attempt,
                           const std::string& token, const actors::RecoveryCounts& counts, bool rescue,
                           const actors::RescueTiming& timing, actors::ControlPort& control, actors::JobEvents& events,
                           actors::RecoveryRoute start_route, launch::SpareWatch* spare_watch = nullptr,
                           InPlaceGrowth* growth = nullptr) {
  auto milliseconds = [](double seconds) { return std::chrono::milliseconds(std::lround(seconds * 1000)); };
  actors::JobPlan job_plan{token,
                           build_id(),
                           config_hash(config),
                           {},
                           milliseconds(args.join_timeout),
                           milliseconds(config.fault.heartbeat_timeout),
                           milliseconds(config.fault.step_timeout),
                           config.pipeline.stages,
                           config.tensor.shards};
  for (const auto& node : plan.nodes) job_plan.nodes.push_back({node.node_index, node.host, node.slots, node.first_rank});
  if (rescue) job_plan.rescue_timeout = timing.job_wait;
  job_plan.last_step = config.train.steps;
  // A lost, silent or unreachable node's process can be started again in place when this launcher
  // started every node, here or through the launcher template (recovery_path.hpp); the launcher is
  // made below, before any node can be lost.
  job_plan.recovery = actors::recovery_shape(config, plan.world_size, args.external == 0);
  job_plan.recovery_timeout = milliseconds(config.fault.rescue_timeout);
  job_plan.attempt = attempt;
  job_plan.events = &events;
  job_plan.start_route = start_route;
  std::unique_ptr<launch::NodeLauncher> launcher;
  // The new process starts its counters with this attempt's in-place recoveries, its own included
  // (TROUPE_RESTARTS). An unreachable node's goes to a spare line, its own host being out of reach.
  if (job_plan.recovery.replaces_nodes)
    job_plan.replace_nodes = [&launcher, &spares, &plan, &attempt, counts](
                                 const std::vector<actors::NodeToReplace>& nodes, int new_attempt,
                                 const std::vector<actors::FailureKind>& in_place) {
      actors::RecoveryCounts seen = counts;
      for (actors::FailureKind kind : in_place) {
        ++seen.failures[kind];
        ++seen.recoveries[actors::RecoverySource::in_place];
      }
      const bool to_spare = in_place.back() == actors::FailureKind::unreachable;
      std::vector<std::string> spare_hosts;
      if (to_spare) {
        std::vector<int> indices;
        for (const actors::NodeToReplace& node : nodes) indices.push_back(node.node_index);
        Expected<std::vector<std::string>> taken = take_spares(spares, indices, plan);
        if (!taken) return actors::NodeReplacements{{}, taken.error().message};
        spare_hosts = std::move(*taken);
      }
      attempt = new_attempt;
      actors::NodeReplacements placed;
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        launch::Environment env{{actors::recovery_counts_variable, seen.to_text()},
                                {actors::env::attempt.name, std::to_string(new_attempt)}};
        // The lost process's MFU basis: the new one joins without measuring it again (a spare line
        // is the same kind of machine).
        if (nodes[i].peak_flops > 0) env.emplace_back(actors::env::peak_flops.name, std::to_string(nodes[i].peak_flops));
        launch::NodePlan& node = plan.nodes.at(static_cast<std::size_t>(nodes[i].node_index));
        if (to_spare) {
          // Alone on its machine, as a spare is meant to be.
          node.host = spare_hosts[i];
          node.local = launch::is_local_host(node.host, launch::this_host_name());
          env.emplace_back(actors::env::local_rank.name, "0");
          env.emplace_back(actors::env::local_world_size.name, std::to_string(node.slots));
          launcher->move_node(nodes[i].node_index, node.host, node.local, std::move(env));
        } else {
          launcher->replace_node(nodes[i].node_index, std::move(env));
        }
        placed.nodes.push_back({nodes[i].node_index, node.host, to_spare});
      }
      return placed;
    };
  // The job's port, known once it listens: where nodes started while the attempt runs join it.
  int job_port = 0;
  if (growth)
    job_plan.grow_nodes = [&launcher, growth, &plan, &attempt, &args, &job_port, &token, counts](int new_attempt) {
      actors::GrownNodes grown;
      if (growth->layout) {
        grown.why_not = "the nodes left out came back already";
        return grown;
      }
      Expected<GrownLayout> layout = growth->plan();
      if (!layout) {
        grown.why_not = layout.error().message;
        return grown;
      }
      const int running_nodes = static_cast<int>(plan.nodes.size());
      // A running node started again later (in place of its lost process) joins the grown job.
      for (int index = 0; index < running_nodes; ++index)
        launcher->update_node(index, node_argv(layout->config),
                              {{actors::env::world_size.name, std::to_string(layout->plan.world_size)}});
      grown.batch_size = layout->config.train.batch_size;
      grown.grad_accum = layout->config.train.grad_accum;
      grown.config_hash = config_hash(layout->config);
      for (launch::NodeProcessSpec& spec :
           launch::node_process_specs(layout->plan, {args.bind, job_port, token}, node_argv(layout->config))) {
        if (spec.node_index < running_nodes) continue;
        spec.env.emplace_back(actors::recovery_counts_variable, counts.to_text());
        spec.env.emplace_back(actors::env::attempt.name, std::to_string(new_attempt));
        const launch::NodePlan& node = layout->plan.nodes.at(static_cast<std::size_t>(spec.node_index));
        grown.nodes.push_back({node.node_index, node.host, node.slots, node.first_rank});
        launcher->add_node(std::move(spec));
      }
      attempt = new_attempt;
      plan = layout->plan;
      growth->layout = std::move(*layout);
      return grown;
    };
  if (growth)
    job_plan.grew = [growth, &control] {
      growth->grown = true;
      const GrownLayout& layout = *growth->layout;
      std::vector<std::string> still_out;
      for (int index : left_out_of(layout.configured, layout.running))
        still_out.push_back(host_line(layout.configured[static_cast<std::size_t>(index)]));
      control.grew(layout.plan.world_size, nodes_on_this_machine(layout.plan), std::move(still_out));
    };
  const bool replaces = actors::choose_recovery(job_plan.recovery, actors::FailureKind::node_lost).in_place;
  // Once the job runs, a node's exit may be answered by a rescue or by starting that node again in
  // place: the launcher holds the others until the supervisor's outcome (stop_all), its
  // replace_node() or the rescue's time is up. Before that, at once.
  auto started = std::make_shared<std::atomic<bool>>(false);
  job_plan.on_start = [started] { *started = true; };
  launcher_options.hold_after_failure = [started, rescue, replaces, hold = timing.launcher_hold] {
    return (rescue || replaces) && *started ? hold : std::chrono::milliseconds(0);
  };

  actors::TroupeConfig cfg;
  actors::beat_connections(cfg, config.fault, false);
  caf::actor_system system{cfg};
  std::promise<actors::job_outcome_msg> outcome_promise;
  auto outcome = outcome_promise.get_future();
  auto listener = system.spawn([&](caf::event_based_actor* self) -> caf::behavior {
    return {[&, self](actors::done_atom, const actors::job_outcome_msg& o) {
      if (o.exit_code != 0 && launcher) launcher->stop_all(launch::JobEnd::node_failed, o.reason);
      outcome_promise.set_value(o);
      self->quit();
    }};
  });
  auto supervisor = actors::spawn_job_supervisor(system, std::move(job_plan), listener);
  launcher_options.on_node_exit = [supervisor](const launch::NodeExit& exit) {
    if (exit.started_again)
      caf::anon_send(supervisor, actors::recover_atom_v, exit.node_index, exit.pid, exit.status.describe());
  };
  // Nodes reach the supervisor through a frame guard (actors/control/frame_guard.hpp): CAF alone would
  // believe any payload length a peer announces. The guard's listener reuses the address.
  auto internal = system.middleman().publish(supervisor, 0, "127.0.0.1");
  const std::uint16_t internal_port = internal ? *internal : 0;
  actors::FrameGuardOptions guard_options{args.bind, static_cast<std::uint16_t>(args.port), internal_port,
                                          1u << 20, 4096,
                                          [](const std::string& line) {
                                            monitor::logger("job")->warn("job port: {}", line);
                                          },
                                          // the node processes of one host may join at once
                                          64, 32};
  // A node's host that stops answering is named before its silence reaches fault.heartbeat_timeout.
  guard_options.unreachable_after = milliseconds(config.fault.heartbeat_timeout / 2);
  guard_options.unreachable = [supervisor](const std::string& address, double seconds) {
    caf::anon_send(supervisor, actors::unreachable_atom_v, address, seconds);
  };
  auto guard = internal ? actors::FrameGuard::start(std::move(guard_options))
                        : Expected<std::unique_ptr<actors::FrameGuard>>(Error{to_string(internal.error())});
  if (!guard) {
    caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
    AttemptOutcome failed;
    failed.exit_code = 2;
    failed.reason = "cannot listen on " + args.bind + ":" + std::to_string(args.port) + ": " + guard.error().message;
    return failed;
  }
  const int port = (*guard)->port();
  job_port = port;
  if (args.external > 0)
    monitor::logger("job")->info(
        "job supervisor on {}:{}; waiting up to {} s for {} node process(es) started by srun, torchrun or by hand, "
        "one rank each",
        args.bind, port, args.join_timeout, plan.nodes.size());
  else
    monitor::logger("job")->info("job supervisor on {}:{}; starting {} node process(es), {} rank(s)", args.bind, port,
                                 plan.nodes.size(), plan.world_size);
  if (Status opened = control.open(system, supervisor, config, plan.world_size, nodes_on_this_machine(plan),
                                   replaces, counts.restarts);
      !opened) {
    caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
    AttemptOutcome failed;
    failed.exit_code = 2;
    failed.reason = opened.error().message;
    return failed;
  }
  const AttemptOrders orders(control, spare_watch);
  if (args.external > 0) {
    // Nothing to start or watch here: the supervisor's join deadline and heartbeat watch end it.
    actors::job_outcome_msg o = outcome.get();
    // The nodes take their stop from this process: it stays until they have hung up, at most
    // fault.heartbeat_timeout, after which a node that heard nothing stops by itself.
    const auto linger_until = std::chrono::steady_clock::now() + milliseconds(config.fault.heartbeat_timeout);
    while ((*guard)->connections() > 0 && std::chrono::steady_clock::now() < linger_until)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
    return actors::attempt_outcome(o);
  }

  std::vector<launch::NodeProcessSpec> commands = launch::node_process_specs(plan, {args.bind, port, token}, node_argv(config));
  for (launch::NodeProcessSpec& command : commands) {
    command.env.emplace_back(actors::recovery_counts_variable, counts.to_text());
    command.env.emplace_back(actors::env::attempt.name, std::to_string(attempt));
  }
  launcher = std::make_unique<launch::NodeLauncher>(std::move(commands), launcher_options);
  launch::JobResult result = launcher->run();
  caf::anon_send_exit(supervisor, caf::exit_reason::user_shutdown);
  // A failed or lost node is named by the supervisor, usually before the launcher returns.
  const bool supervisor_knows = result.end == launch::JobEnd::success || result.end == launch::JobEnd::node_failed;
  if (supervisor_knows && outcome.wait_for(std::chrono::seconds(3)) == std::future_status::ready) {
    actors::job_outcome_msg o = outcome.get();
    // Before the start, a node that fails makes the launcher stop the others, and the supervisor
    // would blame the first of those to go: the launcher saw who failed first. A node that died
    // after every rank finished training leaves a finished job, whatever its exit status says.
    const bool launcher_saw_first = !*started && result.end == launch::JobEnd::node_failed && o.exit_code == 1;
    if (!launcher_saw_first) return actors::attempt_outcome(o);
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

// The job's nodes and batch, as the restart policy works on them.
actors::JobShape job_shape(const std::vector<launch::HostEntry>& hosts, const JobConfig& config) {
  actors::JobShape shape;
  for (const launch::HostEntry& host : hosts) shape.nodes.push_back({host.host, host.slots});
  shape.stages = config.pipeline.stages;
  shape.shards = config.tensor.shards;
  shape.batch = {config.train.batch_size, config.train.grad_accum, config.pipeline.microbatches};
  return shape;
}

// The step of the newest committed checkpoint in checkpoint.dir; -1 with none.
long newest_checkpoint(const JobConfig& config) {
  if (config.checkpoint.dir.empty()) return -1;
  auto steps = checkpoint::committed_steps(config.checkpoint.dir);
  return steps && !steps->empty() ? steps->front() : -1;
}

void log_lines(const std::vector<actors::PolicyLine>& lines) {
  auto log = monitor::logger("job");
  for (const actors::PolicyLine& line : lines) {
    switch (line.level) {
      case actors::PolicyLine::Level::info: log->info(line.text); break;
      case actors::PolicyLine::Level::warn: log->warn(line.text); break;
      case actors::PolicyLine::Level::error: log->error(line.text); break;
    }
  }
}

// The fewest characters of a TROUPE_TOKEN made by hand (troupe launch makes 32).
constexpr std::size_t min_shared_token_length = 16;

// The token of a job whose nodes another launcher starts: theirs and the job's come from the
// same TROUPE_TOKEN.
Expected<std::string> shared_job_token() {
  const std::string token = actors::env::read_token().value_or("");
  if (token.empty())
    return Error{"troupe launch --external needs the job's token in TROUPE_TOKEN, the same in every node's environment"};
  if (token.size() < min_shared_token_length)
    return Error{"TROUPE_TOKEN has " + std::to_string(token.size()) + " characters; a job token needs at least " +
                 std::to_string(min_shared_token_length)};
  return token;
}

// --external N: N nodes of one rank each, on hosts the job learns only as they join.
Expected<std::vector<launch::HostEntry>> external_hosts(const LaunchArgs& args) {
  if (!args.host_file.empty()) return Error{"--external and --hostfile exclude each other: the nodes start elsewhere"};
  return std::vector<launch::HostEntry>(static_cast<std::size_t>(args.external), {"started elsewhere", 1, 0});
}

// troupe launch --external N: the job for nodes that srun, torchrun or a person started. It cannot
// start a node again, so a failure ends the job, after the survivors' rescue snapshot when
// checkpoint.dir allows one; starting the nodes again with checkpoint.resume goes on from there.
int run_external(const LaunchArgs& args, const ResolvedJob& job) {
  auto hosts = external_hosts(args);
  if (!hosts) return error_exit(ExitCode::bad_input, hosts.error().message);
  const launch::RankPlan plan = launch::plan_ranks(*hosts, launch::this_host_name());
  if (Status grid = check_grid_divides(job, plan.world_size); !grid) return error_exit(ExitCode::bad_input, grid.error().message);
  auto token = shared_job_token();
  if (!token) return error_exit(ExitCode::bad_input, token.error().message);
  const auto folder_lock = lock_checkpoint_folder(job.config);
  if (!folder_lock) return error_exit(ExitCode::bad_input, folder_lock.error().message);
  monitor::set_log_job(actors::metrics_job_label(*token));
  actors::JobEvents events;
  actors::ControlPort control(job.config.monitor, *token, &events);
  const bool rescue = actors::rescue_choice(actors::recovery_shape(job.config, plan.world_size, false)).allowed;
  SpareHosts no_spares;
  int first_attempt = 0;
  const AttemptOutcome attempt = run_attempt(args, job.config, plan, {}, no_spares, first_attempt, *token, {}, rescue,
                                             actors::rescue_timing(job.config.fault), control, events,
                                             actors::RecoveryRoute::restart_from_checkpoint);
  control.attempt_ended(attempt.reason);
  events.emit(0, actors::attempt_ended{attempt.exit_code, attempt.failure_kind.value_or(actors::FailureKind::node_exit),
                                       attempt.failed_nodes, attempt.reason});
  events.emit(0, actors::job_ended{attempt.exit_code, 0, actors::RecoveryCounts{}.to_text(), attempt.reason});
  if (attempt.exit_code == 0) return to_int(ExitCode::success);
  return error_exit(exit_code_of(attempt.exit_code), attempt.reason);
}

// The nodes a grow brings back (indices into the host file's nodes) and the batch split for the
// job then.
struct GrownJob {
  std::vector<int> back;
  actors::BatchShape batch;
};

// A grow after the shell's rejoin: each of `new_spares` takes the first node of `left_out` it has
// slots for, which moves to it (`configured` updated); with no new spare line, every node left out
// comes back on its own line. Nodes still left out keep the global batch as a shrink does.
GrownJob grow(std::vector<launch::HostEntry>& configured, const std::vector<int>& left_out,
              const std::vector<launch::HostEntry>& new_spares, const JobConfig& configured_config) {
  GrownJob grown;
  if (new_spares.empty()) grown.back = left_out;
  for (const launch::HostEntry& spare : new_spares)
    for (int index : left_out) {
      launch::HostEntry& node = configured[static_cast<std::size_t>(index)];
      if (node.slots > spare.slots || std::find(grown.back.begin(), grown.back.end(), index) != grown.back.end())
        continue;
      node.host = spare.host;
      grown.back.push_back(index);
      break;
    }
  const actors::JobShape whole = job_shape(configured, configured_config);
  grown.batch = whole.batch;
  std::vector<int> still_out;
  for (int index : left_out)
    if (std::find(grown.back.begin(), grown.back.end(), index) == grown.back.end()) still_out.push_back(index);
  if (!still_out.empty()) {
    Expected<actors::ShrinkPlan> smaller = actors::plan_shrink(whole, still_out);
    TROUPE_CHECK(smaller.ok(), "a grow leaves out fewer nodes than the shrink that planned this batch");
    grown.batch = smaller->batch;
  }
  return grown;
}

}  // namespace

int run_launch(const LaunchArgs& args, const ResolvedJob& job) {
  monitor::set_identity(-1, "job");
  if (args.external > 0) return run_external(args, job);
  // Without a host file, inside a Slurm allocation: its nodes, their tasks as slots, srun to start them.
  std::optional<launch::SlurmAllocation> slurm;
  if (args.workers == 0 && args.host_file.empty()) {
    auto allocation = launch::slurm_allocation([](std::string_view name) -> std::optional<std::string> {
      const char* value = std::getenv(std::string(name).c_str());
      return value ? std::optional<std::string>(value) : std::nullopt;
    });
    if (!allocation)
      return error_exit(ExitCode::bad_input,
                        "troupe launch needs --hostfile FILE, or to run inside a Slurm allocation (SLURM_JOB_NODELIST)");
    if (!*allocation) return error_exit(ExitCode::bad_input, allocation->error().message);
    slurm = std::move(**allocation);
  }
  auto host_file = slurm ? Expected<launch::HostFile>(launch::HostFile{slurm->hosts, {}}) : job_hosts(args);
  if (!host_file) return error_exit(ExitCode::bad_input, host_file.error().message);
  std::vector<launch::HostEntry>& hosts = host_file->nodes;
  SpareHosts spares{host_file->spares, {}};
  launch::RankPlan plan = launch::plan_ranks(hosts, launch::this_host_name());
  if (Status fits = job_fits_this_machine(args, job, plan); !fits)
    return error_exit(ExitCode::bad_input, fits.error().message);
  // Held through every restart: the attempts are one job.
  const auto folder_lock = lock_checkpoint_folder(job.config);
  if (!folder_lock) return error_exit(ExitCode::bad_input, folder_lock.error().message);
  launch::LauncherOptions launcher_options;
  if (!args.launcher.empty()) {
    auto parsed = launch::LaunchTemplate::parse(args.launcher);
    if (!parsed) return error_exit(ExitCode::bad_input, parsed.error().message);
    launcher_options.remote = *parsed;
  } else if (slurm) {
    launcher_options.remote = launch::srun_template();
  }
  if (slurm) {
    std::string listed;
    for (const launch::HostEntry& host : hosts)
      listed += (listed.empty() ? "" : ", ") + host.host + " slots=" + std::to_string(host.slots);
    monitor::logger("job")->info("hosts from the Slurm allocation ({}): {}; launcher `{}`", slurm->source, listed,
                                 launcher_options.remote.text());
  }
  auto token = new_job_token();
  if (!token) return error_exit(ExitCode::failure, token.error().message);
  monitor::set_log_job(actors::metrics_job_label(*token));  // the label the nodes' lines and metrics carry
  actors::JobEvents events;
  actors::ControlPort control(job.config.monitor, *token, &events);

  // Recovery (docs/drills.md, "Recovery"): when a node fails or is lost, the survivors write
  // their memory of the last completed step as a checkpoint when the policy allows a rescue
  // (actors/supervision/restart_policy.hpp), and every node restarts from the newest checkpoint,
  // up to fault.max_restarts times. A node that cannot come back, or a spent budget, ends the job
  // unless fault.elastic lets it shrink; a node the job asks to drop is left out at once. A failure
  // that repeats with no newer checkpoint to start from ends the job too.
  JobConfig config = job.config;
  const actors::RescueTiming timing = actors::rescue_timing(config.fault);
  actors::RestartHistory history;
  int attempt_number = 0;  // TROUPE_ATTEMPT: the last one this job began
  // The host file's nodes, and which of them this attempt runs (by index there): a shrink leaves
  // some out, the shell's rejoin brings them back.
  std::vector<launch::HostEntry> configured = hosts;
  std::vector<int> running(hosts.size());
  std::iota(running.begin(), running.end(), 0);
  std::vector<launch::HostEntry> spare_lines = host_file->spares;  // every spare line the job knows of
  actors::RecoveryRoute start_route = actors::RecoveryRoute::restart_from_checkpoint;  // how the next attempt resumes
  for (;;) {
    const std::vector<int> left_out = left_out_of(configured, running);
    std::vector<std::string> left_out_lines;
    std::vector<int> left_out_slots;
    for (int index : left_out) {
      const launch::HostEntry& node = configured[static_cast<std::size_t>(index)];
      left_out_lines.push_back(host_line(node));
      left_out_slots.push_back(node.slots);
    }
    control.set_left_out(std::move(left_out_lines));
    InPlaceGrowth growth;
    launch::SpareWatch watch({slurm ? std::string() : args.host_file, spare_lines, left_out_slots,
                              [&control, &args, &growth](const std::vector<launch::HostEntry>& found) {
                                if (growth.grown) return;  // one grow in place an attempt
                                monitor::logger("job")->info(
                                    "{}:{}: a new spare line ({} slots={}) can take a node the job went on without: "
                                    "ordering the job's rejoin",
                                    args.host_file, found.front().line, found.front().host, found.front().slots);
                                control.order("rejoin");
                              }});
    actors::RestartOptions options =
        actors::restart_options(config, actors::recovery_shape(config, plan.world_size, true));
    const bool rescue = actors::rescue_choice(options.shape).allowed;
    const long checkpoint_at_start = newest_checkpoint(config);
    // The shell's rejoin, or a new spare line, brings the nodes left out back into the running job
    // where it can (JobPlan::grow_nodes): after the running nodes, with the batch split as a grow
    // by restart would split it.
    growth.plan = [&]() -> Expected<GrownLayout> {
      if (left_out.empty()) return Error{"no node was left out"};
      GrownLayout layout{hosts, running, configured, watch.found(), config, {}};
      const GrownJob grown = grow(layout.configured, left_out, layout.new_spares, job.config);
      for (int index : grown.back) {
        layout.hosts.push_back(layout.configured[static_cast<std::size_t>(index)]);
        layout.running.push_back(index);
      }
      layout.config.train.batch_size = grown.batch.batch_size;
      layout.config.train.grad_accum = grown.batch.grad_accum;
      layout.config.pipeline.microbatches = grown.batch.microbatches;
      layout.plan = launch::plan_ranks(layout.hosts, launch::this_host_name());
      return layout;
    };
    const std::int64_t attempt_began = events.last_seq();
    AttemptOutcome attempt = run_attempt(args, config, plan, launcher_options, spares, attempt_number, *token,
                                         history.counts, rescue, timing, control, events, start_route, &watch, &growth);
    const int ended_attempt = attempt_number;
    attempt.in_place_recoveries = actors::in_place_recoveries(events, attempt_began);
    std::vector<launch::HostEntry> new_spares = watch.found();
    ++attempt_number;  // a restart, if one follows, is the next attempt
    if (growth.grown) {
      // The job ran grown: whatever follows starts from the grown job.
      hosts = growth.layout->hosts;
      running = growth.layout->running;
      configured = growth.layout->configured;
      config = growth.layout->config;
      spare_lines.insert(spare_lines.end(), growth.layout->new_spares.begin(), growth.layout->new_spares.end());
      new_spares.clear();
      options = actors::restart_options(
          config, actors::recovery_shape(config, static_cast<int>(growth.layout->plan.world_size), true));
    }
    // A node that went to a spare line stays there.
    for (const auto& [index, spare] : spares.taken) {
      hosts[static_cast<std::size_t>(index)].host = spare.host;
      configured[static_cast<std::size_t>(running[static_cast<std::size_t>(index)])].host = spare.host;
    }
    spares.taken.clear();
    plan = launch::plan_ranks(hosts, launch::this_host_name());
    attempt.checkpoint_at_start = checkpoint_at_start;
    attempt.checkpoint_at_end = newest_checkpoint(config);
    control.attempt_ended(attempt.reason);
    const actors::JobShape before = job_shape(hosts, config);
    actors::RestartDecision decision = actors::decide_restart(history, attempt, options, before);
    log_lines(decision.log);
    history = decision.next;
    start_route = actors::announce_decision(events, ended_attempt, attempt, decision, before);
    switch (decision.action) {
      case actors::RestartDecision::Action::finish: return to_int(ExitCode::success);
      case actors::RestartDecision::Action::stop: return error_exit(exit_code_of(decision.exit_code), decision.reason);
      case actors::RestartDecision::Action::shrink: {
        std::vector<launch::HostEntry> kept;
        std::vector<int> still_running;
        for (int index : decision.shrink->kept) {
          kept.push_back(hosts[static_cast<std::size_t>(index)]);
          still_running.push_back(running[static_cast<std::size_t>(index)]);
        }
        hosts = std::move(kept);
        running = std::move(still_running);
        config.train.batch_size = decision.shrink->batch.batch_size;
        config.train.grad_accum = decision.shrink->batch.grad_accum;
        config.pipeline.microbatches = decision.shrink->batch.microbatches;
        plan = launch::plan_ranks(hosts, launch::this_host_name());
        break;
      }
      case actors::RestartDecision::Action::grow: {
        const GrownJob grown = grow(configured, left_out_of(configured, running), new_spares, job.config);
        running.insert(running.end(), grown.back.begin(), grown.back.end());
        std::sort(running.begin(), running.end());
        spare_lines.insert(spare_lines.end(), new_spares.begin(), new_spares.end());
        hosts.clear();
        history.rejoined.clear();
        for (int index : running) {
          if (std::find(grown.back.begin(), grown.back.end(), index) != grown.back.end())
            history.rejoined.push_back(static_cast<int>(hosts.size()));
          hosts.push_back(configured[static_cast<std::size_t>(index)]);
        }
        config.train.batch_size = grown.batch.batch_size;
        config.train.grad_accum = grown.batch.grad_accum;
        config.pipeline.microbatches = grown.batch.microbatches;
        plan = launch::plan_ranks(hosts, launch::this_host_name());
        actors::announce_grow(events, ended_attempt, before, job_shape(hosts, config), grown.back);
        break;
      }
      case actors::RestartDecision::Action::restart_from_replica:
      case actors::RestartDecision::Action::restart_from_checkpoint: break;
    }
    config.checkpoint.resume = true;
  }
}

Command add_launch_command(CLI::App& app) {
  auto args = std::make_shared<LaunchArgs>();
  auto job = std::make_shared<TrainArgs>();
  CLI::App* command = app.add_subcommand("launch", "Start a data-parallel job: one node process per host-file line.");
  command
      ->add_option("--hostfile", args->host_file,
                   "DeepSpeed host file: 'host slots=N' per line (default inside a Slurm allocation: its nodes)")
      ->type_name("FILE");
  command->add_option("--bind", args->bind, "address the job supervisor listens on")->capture_default_str();
  command->add_option("--port", args->port, "port of the job supervisor; 0 = any free")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  command->add_option("--launcher", args->launcher, "command template for remote hosts, e.g. 'ssh {host} {command}'");
  command->add_option("--join-timeout", args->join_timeout, "seconds for every node to join")
      ->check(seconds_in(0.1, 86400))
      ->capture_default_str();
  command
      ->add_option(
          "--external", args->external,
          "start no node: wait for N one-rank nodes started by srun, torchrun or by hand (token: $TROUPE_TOKEN)")
      ->check(CLI::Range(1, 1 << 20))
      ->type_name("N");
  add_config_options(*command, *job);
  add_memory_limit(*command, *job);
  return job_command(*command, job, [args, job](const ResolvedJob& resolved) {
    auto limit = memory_limit(*job);
    if (!limit) return error_exit(ExitCode::bad_input, limit.error().message);
    args->memory_limit = *limit;
    return run_launch(*args, resolved);
  });
}

}  // namespace troupe::apps
