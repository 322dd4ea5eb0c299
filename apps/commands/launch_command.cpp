// troupe launch / troupe train --workers N: the job process. It checks what can be checked here,
// reads the host file (or the Slurm allocation) and hands the job to the job runner
// (actors/supervision/job_runner.hpp), which starts one `troupe node` per host-file line through
// the launcher (launched_nodes.hpp), publishes the job supervisor, and restarts, shrinks or grows
// the job as its policy says. With --external N it starts no node: N one-rank nodes that srun,
// torchrun or a person started join it (rank 0's `troupe node` runs it so under srun and
// torchrun), and a failure ends the job.

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <set>
#include <string>
#include <thread>

#include "actors/control/control_port.hpp"
#include "actors/job_events.hpp"
#include "actors/process_environment.hpp"
#include "actors/process_metrics.hpp"
#include "actors/supervision/job_runner.hpp"
#include "actors/worker/job_data.hpp"
#include "apps/commands/checkpoint_folder_lock.hpp"
#include "apps/commands/commands.hpp"
#include "apps/commands/job_identity.hpp"
#include "apps/commands/launched_nodes.hpp"
#include "apps/config/memory_fit.hpp"
#include "apps/config/speeds.hpp"
#include "apps/config/value.hpp"
#include "apps/exit_codes.hpp"
#include "apps/launch/host_file.hpp"
#include "apps/launch/island_placement.hpp"
#include "apps/launch/local_host.hpp"
#include "apps/launch/rank_plan.hpp"
#include "apps/launch/slurm_allocation.hpp"
#include "comm/grid.hpp"
#include "comm/sysv_segments.hpp"
#include "monitor/log.hpp"

namespace troupe::apps {
namespace {

Expected<launch::HostFile> job_hosts(const LaunchArgs& args) {
  if (args.workers > 0)
    return launch::HostFile{std::vector<launch::HostEntry>(static_cast<std::size_t>(args.workers), {"localhost", 1, 0}),
                            {}};
  return launch::read_host_file(args.host_file);
}

std::vector<actors::NodeShape> node_lines(const std::vector<launch::HostEntry>& entries) {
  std::vector<actors::NodeShape> lines;
  for (const launch::HostEntry& entry : entries) lines.push_back({entry.host, entry.slots});
  return lines;
}

// train.balance static without train.replica_speeds: each replica's speed is its first rank's
// host-file line's speed= (a replica's tensor and context shards are consecutive ranks), written into the key
// the node processes are given; left empty when every line's is 1.
JobConfig with_host_speeds(JobConfig config, const std::vector<launch::HostEntry>& nodes) {
  const bool declared =
      std::any_of(nodes.begin(), nodes.end(), [](const launch::HostEntry& n) { return n.speed != 1; });
  if (config.train.balance == compute::BalanceMode::none || !config.train.replica_speeds.empty() || !declared)
    return config;
  std::string speeds;
  int rank = 0;
  for (const launch::HostEntry& node : nodes)
    for (int slot = 0; slot < node.slots; ++slot, ++rank)
      if (rank % (config.tensor.shards * config.context.shards) == 0)
        speeds += (speeds.empty() ? "" : ",") + format_number(node.speed);
  config.train.replica_speeds = speeds;
  return config;
}

// A host file whose lines name their islands (island=K): its lines ordered so that each line's ranks
// are in its island (launch/island_placement.hpp), and the placement logged; the lines as they
// are when none names one.
Expected<std::vector<launch::HostEntry>> island_lines(const LaunchArgs& args, const ResolvedJob& job,
                                                      std::vector<launch::HostEntry> nodes) {
  if (nodes.empty() || nodes.front().island < 0) return nodes;
  const JobConfig& c = job.config;
  if (c.train.sync != compute::SyncMode::diloco)
    return Error{args.host_file + ":" + std::to_string(nodes.front().line) +
                 ": island=K places DiLoCo's islands, and train.sync is not diloco"};
  int world = 0;
  for (const launch::HostEntry& node : nodes) world += node.slots;
  if (Status grid = check_grid_divides(job, world); !grid) return grid.error();
  const comm::Grid grid{world / (c.pipeline.stages * c.tensor.shards), c.pipeline.stages, c.tensor.shards};
  std::vector<int> island_of_rank;
  for (int rank = 0; rank < world; ++rank) island_of_rank.push_back(comm::island_of(grid, rank, c.train.islands));
  auto placed = launch::place_islands(nodes, island_of_rank, c.train.islands, args.host_file);
  if (!placed) return placed.error();
  monitor::logger("job")->info("islands from {}: {}", args.host_file,
                               launch::describe_island_placement(*placed, c.train.islands));
  return placed;
}

// The machines the plan's nodes run on: its distinct hosts, every alias of this one counted once.
int machines(const launch::RankPlan& plan) {
  std::set<std::string> hosts;
  for (const launch::NodePlan& node : plan.nodes) hosts.insert(node.local ? std::string() : node.host);
  return std::max<int>(1, int(hosts.size()));
}

// What can be known on this machine before any node starts: its workers fit its cores (sim ranks
// aside), every rank's layout fits its memory (--memory-limit, else this machine's share), its sim
// ranks fit its System V shared memory segments, and, when a node runs here and so reads the same
// files, the data loads and fits the vocabulary (the error a node would report, said once and as
// bad input).
Status job_fits_this_machine(const LaunchArgs& args, const ResolvedJob& job, const launch::RankPlan& plan) {
  const std::string origin = args.workers > 0 ? "--workers " + std::to_string(args.workers) : args.host_file;
  if (Status grid = check_grid_divides(job, plan.world_size); !grid) return grid;
  // A sim rank sleeps through its modelled ops: the cap on workers a core runs is for ranks that compute.
  if (job.config.train.backend != compute::BackendKind::sim)
    if (Status cores = launch::check_local_workers(plan, std::thread::hardware_concurrency(), origin); !cores)
      return cores;
  const int here = launch::local_workers(plan);
  if (Status memory = check_memory_fit(job, {plan.world_size, machines(plan), here}, args.memory_limit); !memory)
    return memory;
  if (job.config.train.backend == compute::BackendKind::sim && here > 0 && comm::sim_transports_are_troupes())
    if (const std::optional<comm::SysvSegments> segments = comm::sysv_segments())
      if (Status room = launch::check_local_sysv_segments(plan, comm::sysv_segments_per_sim_rank, segments->in_use,
                                                          segments->limit, origin);
          !room)
        return room;
  if (here == 0) return Status::success();
  auto data = actors::load_job_data(job);
  if (!data) return data.error();
  return Status::success();
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

actors::JobContactOptions job_contact(const LaunchArgs& args, std::string token) {
  return {args.bind,
          args.port,
          std::chrono::milliseconds(std::lround(args.join_timeout * 1000)),
          std::move(token),
          build_id(),
          [](const JobConfig& config) { return config_hash(config); },
          [](const JobConfig& config) {
            // Read (and checked) when the job was resolved: an error here is an internal one.
            return parse_speeds("train.replica_speeds", config.train.replica_speeds, "a replica").value();
          }};
}

int job_exit(const actors::JobEnd& end) {
  if (end.exit_code == 0) return to_int(ExitCode::success);
  return error_exit(exit_code_of(end.exit_code), end.reason);
}

// troupe launch --external N: the job for nodes that srun, torchrun or a person started. It cannot
// start a node again, so a failure ends the job, after the survivors' rescue snapshot when
// checkpoint.dir allows one; starting the nodes again with checkpoint.resume goes on from there.
int run_external(const LaunchArgs& args, const ResolvedJob& job) {
  if (!args.host_file.empty())
    return error_exit(ExitCode::bad_input, "--external and --hostfile exclude each other: the nodes start elsewhere");
  if (Status grid = check_grid_divides(job, args.external); !grid)
    return error_exit(ExitCode::bad_input, grid.error().message);
  auto token = shared_job_token();
  if (!token) return error_exit(ExitCode::bad_input, token.error().message);
  const auto folder_lock = lock_checkpoint_folder(job.config);
  if (!folder_lock) return error_exit(ExitCode::bad_input, folder_lock.error().message);
  monitor::set_log_job(actors::metrics_job_label(*token));
  actors::JobEvents events;
  actors::ControlPort control(job.config.monitor, *token, &events);
  return job_exit(actors::run_external_job(job_contact(args, *token), job.config, args.external, control, events));
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
  auto placed = island_lines(args, job, std::move(host_file->nodes));
  if (!placed) return error_exit(ExitCode::bad_input, placed.error().message);
  host_file->nodes = std::move(*placed);
  const launch::RankPlan plan = launch::plan_ranks(host_file->nodes, launch::this_host_name());
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
    for (const launch::HostEntry& host : host_file->nodes)
      listed += (listed.empty() ? "" : ", ") + host.host + " slots=" + std::to_string(host.slots);
    monitor::logger("job")->info("hosts from the Slurm allocation ({}): {}; launcher `{}`", slurm->source, listed,
                                 launcher_options.remote.text());
  }
  auto token = new_job_token();
  if (!token) return error_exit(ExitCode::failure, token.error().message);
  monitor::set_log_job(actors::metrics_job_label(*token));  // the label the nodes' lines and metrics carry
  actors::JobEvents events;
  actors::ControlPort control(job.config.monitor, *token, &events);
  LaunchedNodes starter(std::move(launcher_options), slurm ? std::string() : args.host_file);
  return job_exit(actors::run_job(job_contact(args, *token), with_host_speeds(job.config, host_file->nodes),
                                  node_lines(host_file->nodes), node_lines(host_file->spares), starter, control,
                                  events));
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
    if (!resolved.config.init.from.empty())
      if (Status imported = import_initial_weights(resolved); !imported)
        return error_exit(ExitCode::bad_input, imported.error().message);
    return run_launch(*args, resolved);
  });
}

}  // namespace troupe::apps
