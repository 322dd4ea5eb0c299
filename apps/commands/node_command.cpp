// troupe node: one node process of a job (actors/node/node_process.hpp). The job's address,
// token and node index come from the flags or from TROUPE_JOIN / TROUPE_TOKEN /
// TROUPE_NODE_INDEX, the node's ranks from RANK, TROUPE_SLOTS and WORLD_SIZE, all of which
// troupe launch sets (actors/process_environment.hpp). Started by srun or torchrun instead, without those,
// it takes the rank and world from SLURM_PROCID and SLURM_NTASKS, its node index from its rank
// (one worker per process), and the job's address from MASTER_ADDR and MASTER_PORT; rank 0 then
// hosts the job too (troupe launch --external, docs/multi-host.md) unless a job answers there
// already, and every rank keeps trying to reach it for --join-timeout. An invalid or missing variable stops the node
// before it starts anything: one line naming it and its value, exit code 2.

#include <arpa/inet.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "actors/node/node_process.hpp"
#include "actors/process_environment.hpp"
#include "apps/commands/commands.hpp"
#include "apps/commands/job_identity.hpp"
#include "apps/commands/shell/handshake_probe.hpp"
#include "apps/config/value.hpp"
#include "apps/exit_codes.hpp"
#include "apps/launch/local_host.hpp"
#include "compute/environment.hpp"

extern char** environ;

namespace troupe::apps {
namespace {

namespace env = actors::env;

// How long rank 0 waits for a job that already listens at MASTER_ADDR:MASTER_PORT to answer before
// it hosts the job itself: a listening job answers a connection at once.
constexpr std::chrono::seconds job_probe_timeout{1};

// Slurm's own variable `name` (an integer >= min) into `into` when `ours` is unset: the node runs
// under srun rather than troupe launch.
Status take_slurm(const char* ours, const char* name, int& into, int min = 0) {
  if (environment_text(ours) || !environment_text(name)) return Status::success();
  auto value = environment_integer(name, 0, min, std::numeric_limits<int>::max());
  if (!value) return value.error();
  into = static_cast<int>(*value);
  return Status::success();
}

// Moves a read variable's value into `into`; its error when it was invalid.
template <class T, class U>
Status take(Expected<T> value, U& into) {
  if (!value) return value.error();
  into = std::move(*value);
  return Status::success();
}

// How the node was started: by troupe launch (or by hand, with --join or TROUPE_JOIN), or, with
// its job's address in MASTER_ADDR and MASTER_PORT, by srun or torchrun beside the job, which
// rank 0 then runs in its process group (hosts_job), listening at job_bind:join_port.
struct NodeStart {
  actors::NodeProcessOptions options;
  bool hosts_job = false;
  std::string job_bind;
};

// torchrun's agent serves its own store on MASTER_PORT when its workers use it
// (TORCHELASTIC_USE_AGENT_STORE=True); the job then listens on the port after it.
bool torchrun_holds_master_port() { return environment_text("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True"; }

// An address the job can listen on for MASTER_ADDR: itself when it is an IPv4 address, else every
// interface (a host name may resolve to a loopback address on its own host).
std::string listen_address(const std::string& master_addr) {
  in_addr parsed{};
  return inet_pton(AF_INET, master_addr.c_str(), &parsed) == 1 ? master_addr : "0.0.0.0";
}

// The job's address for a node that srun or torchrun started: MASTER_ADDR and the job's port.
Status take_master(NodeStart& start, const NodeArgs& args) {
  const auto master_addr = environment_text(env::master_addr.name), master_port = environment_text(env::master_port.name);
  const char* missing = !master_addr ? "MASTER_ADDR" : !master_port ? "MASTER_PORT" : nullptr;
  if (missing)
    return Error{"troupe node started by srun or torchrun needs MASTER_ADDR and MASTER_PORT (rank 0's host and a free "
                 "port there), or --join HOST:PORT; not set: " +
                 std::string(missing)};
  auto port = parse_environment_integer(env::master_port.name, *master_port, 1, 65535);
  if (!port) return port.error();
  if (torchrun_holds_master_port() && *port == 65535)
    return Error{"MASTER_PORT 65535: under torchrun the job listens on MASTER_PORT + 1, which does not exist"};
  start.options.join_host = *master_addr;
  start.options.join_port = static_cast<int>(*port) + (torchrun_holds_master_port() ? 1 : 0);
  start.options.join_patience = std::chrono::milliseconds(std::lround(args.join_timeout * 1000));
  start.hosts_job = start.options.first_rank == 0;
  start.job_bind = listen_address(*master_addr);
  return Status::success();
}

// The node's options from its flags and variables: the first invalid one's error line.
Expected<NodeStart> node_options(const NodeArgs& args) {
  NodeStart start;
  actors::NodeProcessOptions& options = start.options;
  for (Status read :
       {take(env::read_rank(), options.first_rank), take(env::read_world_size(), options.world_size),
        take(env::read_slots(), options.slots), take(env::read_local_rank(), options.local_rank_base),
        take(env::read_local_world_size(), options.local_world_size), take(env::read_restarts(), options.recovery),
        take(env::read_attempt(), options.attempt), take(env::read_peak_flops(), options.peak_flops)}) {
    if (!read) return read.error();
  }
  for (Status read : {take_slurm(env::rank.name, "SLURM_PROCID", options.first_rank),
                      take_slurm(env::world_size.name, "SLURM_NTASKS", options.world_size),
                      take_slurm(env::local_rank.name, "SLURM_LOCALID", options.local_rank_base),
                      take_slurm(env::local_world_size.name, "SLURM_NTASKS_PER_NODE", options.local_world_size, 1)})
    if (!read) return read.error();
  if (std::int64_t{options.first_rank} + options.slots > options.world_size)
    return Error{"TROUPE_SLOTS " + std::to_string(options.slots) + " with RANK " + std::to_string(options.first_rank) +
                 " does not fit WORLD_SIZE " + std::to_string(options.world_size)};
  options.node_index = args.node_index;
  if (options.node_index < 0) {
    if (Status read = take(env::read_node_index(), options.node_index); !read) return read.error();
  }
  if (options.node_index < 0 && options.slots == 1) options.node_index = options.first_rank;
  options.token = args.token.empty() ? env::read_token().value_or("") : args.token;
  options.handshake_patience = std::chrono::milliseconds(std::lround(args.join_timeout * 1000));
  const std::optional<std::string> join_variable = args.join.empty() ? env::read_join() : std::nullopt;
  const bool under_srun_or_torchrun = environment_text("SLURM_PROCID") || environment_text(env::rank.name) ||
                                      environment_text(env::master_addr.name) || environment_text(env::master_port.name);
  if (args.join.empty() && !join_variable && under_srun_or_torchrun) {
    if (Status master = take_master(start, args); !master) return master.error();
    if (options.token.empty())
      return Error{"troupe node started by srun or torchrun needs the job's token in TROUPE_TOKEN (or --token), the "
                   "same for every rank"};
    return start;
  }
  const std::string join = join_variable.value_or(args.join);
  const auto colon = join.rfind(':');
  int port = 0;
  const char* port_end = join.data() + join.size();
  if (colon == std::string::npos || std::from_chars(join.data() + colon + 1, port_end, port).ptr != port_end ||
      port < 1 || port > 65535) {
    if (join_variable) return environment_error(env::join.name, "HOST:PORT", join);
    return Error{"--join '" + join + "' is not HOST:PORT"};
  }
  options.join_host = join.substr(0, colon);
  options.join_port = port;
  return start;
}

// Rank 0 of a job that srun or torchrun started hosts it: `troupe launch --external WORLD_SIZE`
// as a child in this process's group, its output beside this node's, the token in its
// environment rather than on its command line.
Expected<pid_t> start_hosted_job(const NodeStart& start, const NodeArgs& args, const ResolvedJob& job) {
  std::vector<std::string> argv{launch::this_executable(), "launch", "--external",
                                std::to_string(start.options.world_size), "--bind", start.job_bind, "--port",
                                std::to_string(start.options.join_port), "--join-timeout",
                                std::to_string(args.join_timeout)};
  for (std::string& argument : override_arguments(job.config)) argv.push_back(std::move(argument));
  std::vector<char*> argv_pointers;
  for (std::string& argument : argv) argv_pointers.push_back(argument.data());
  argv_pointers.push_back(nullptr);
  std::vector<std::string> environment{std::string(env::token.name) + "=" + start.options.token};
  for (char** variable = environ; *variable; ++variable)
    if (std::string_view(*variable).substr(0, std::strlen(env::token.name) + 1) != std::string(env::token.name) + "=")
      environment.emplace_back(*variable);
  std::vector<char*> environment_pointers;
  for (std::string& variable : environment) environment_pointers.push_back(variable.data());
  environment_pointers.push_back(nullptr);
  pid_t pid = -1;
  if (int error = posix_spawn(&pid, launch::executable_to_spawn(argv[0]).c_str(), nullptr, nullptr,
                              argv_pointers.data(), environment_pointers.data());
      error != 0)
    return Error{"cannot start the job process " + argv[0] + ": " + std::strerror(error)};
  return pid;
}

int exit_code_of_status(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

// The hosted job's verdict: its exit code once it has ended. With `stop` (this node never joined,
// so the job would wait for it), a job still running is stopped and has no verdict (0); one that
// already ended on its own (its join deadline) keeps its own.
int finish_hosted_job(pid_t pid, bool stop) {
  int status = 0;
  if (stop) {
    if (waitpid(pid, &status, WNOHANG) == pid) return exit_code_of_status(status);
    ::kill(pid, SIGTERM);
  }
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return stop ? 0 : exit_code_of_status(status);
}

}  // namespace

int run_node(const NodeArgs& args, const ResolvedJob& job) {
  auto start = node_options(args);
  if (!start) return error_exit(ExitCode::bad_input, start.error().message);
  actors::NodeProcessOptions* options = &start->options;
  auto gone = env::read_drill_node_gone();
  if (!gone) return error_exit(ExitCode::bad_input, gone.error().message);
  // `troupe drill node-lost`: node TROUPE_DRILL_NODE_GONE fails whenever it is started again (at
  // every restart, or in place of its lost process: its counts then hold a failure), as a machine
  // that does not come back would.
  const bool started_again = options->recovery.restarts > 0 || !options->recovery.failures.empty();
  if (started_again && *gone == options->node_index)
    return error_exit(ExitCode::failure, "drill: node " + std::to_string(options->node_index) + " cannot come back");
  options->host_name = launch::this_host_name();
  options->build_id = build_id();
  options->config_hash = config_hash(job.config);
  // `troupe launch --external N` run by itself already hosts the job: rank 0 joins it then.
  if (start->hosts_job && shell::await_handshake(options->join_host, options->join_port, job_probe_timeout)) {
    std::fprintf(stderr, "troupe: node %d: a job already listens at %s:%d (troupe launch --external); joining it\n",
                 options->node_index, options->join_host.c_str(), options->join_port);
    start->hosts_job = false;
  }
  std::optional<pid_t> hosted_job;
  if (start->hosts_job) {
    auto pid = start_hosted_job(*start, args, job);
    if (!pid) return error_exit(ExitCode::failure, pid.error().message);
    hosted_job = *pid;
  }
  const actors::NodeOutcome outcome = actors::run_node_process(*options, job);
  // The job's verdict, which it printed itself, outranks this node's.
  const int job_code = hosted_job ? finish_hosted_job(*hosted_job, outcome.before_join) : 0;
  if (outcome.exit_code != 0) {
    if (outcome.before_join && job_code == 0) return error_exit(exit_code_of(outcome.exit_code), outcome.reason);
    std::fprintf(stderr, "troupe: node %d: %s\n", options->node_index, outcome.reason.c_str());
  }
  return job_code != 0 ? job_code : outcome.exit_code;
}

Command add_node_command(CLI::App& app) {
  auto args = std::make_shared<NodeArgs>();
  auto job = std::make_shared<TrainArgs>();
  CLI::App* command = app.add_subcommand("node", "One node process of a job (troupe launch starts these).");
  command->add_option("--join", args->join, "HOST:PORT of the job supervisor (default $TROUPE_JOIN)");
  command->add_option("--token", args->token, "the job's token (default $TROUPE_TOKEN)");
  command->add_option("--node-index", args->node_index, "this node's host-file line (default $TROUPE_NODE_INDEX)")
      ->check(CLI::Range(0, 1 << 20));
  command
      ->add_option("--join-timeout", args->join_timeout,
                   "seconds for every node to join the job (the one rank 0 hosts under srun or torchrun); a late "
                   "handshake is tried again this long")
      ->check(seconds_in(0.1, 86400))
      ->capture_default_str();
  add_config_options(*command, *job);
  return job_command(*command, job, [args](const ResolvedJob& resolved) { return run_node(*args, resolved); });
}

}  // namespace troupe::apps
