// troupe node: one node process of a job (actors/worker/node_process.hpp). The job's address,
// token and node index come from the flags or from TROUPE_JOIN / TROUPE_TOKEN /
// TROUPE_NODE_INDEX, the node's ranks from RANK, TROUPE_SLOTS and WORLD_SIZE, all of which
// troupe launch sets (actors/environment.hpp). Started by srun or torchrun instead, without those,
// it takes the rank and world from SLURM_PROCID and SLURM_NTASKS, its node index from its rank
// (one worker per process), and the job's address from MASTER_ADDR and MASTER_PORT. An invalid
// variable stops the node before it starts anything: one line naming it and its value, exit code 2.

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <limits>

#include "actors/environment.hpp"
#include "actors/worker/node_process.hpp"
#include "apps/commands/commands.hpp"
#include "apps/commands/job_identity.hpp"
#include "apps/exit_codes.hpp"
#include "apps/launch/local_host.hpp"
#include "compute/environment.hpp"

namespace troupe::apps {
namespace {

namespace env = actors::env;

// Slurm's own variable `name` (an integer >= 0) into `into` when `ours` is unset: the node runs
// under srun rather than troupe launch.
Status take_slurm(const char* ours, const char* name, int& into) {
  if (environment_text(ours) || !environment_text(name)) return Status::success();
  auto value = environment_integer(name, 0, 0, std::numeric_limits<int>::max());
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

// The node's options from its flags and variables: the first invalid one's error line.
Expected<actors::NodeProcessOptions> node_options(const NodeArgs& args) {
  actors::NodeProcessOptions options;
  for (Status read :
       {take(env::read_rank(), options.first_rank), take(env::read_world_size(), options.world_size),
        take(env::read_slots(), options.slots), take(env::read_local_rank(), options.local_rank_base),
        take(env::read_local_world_size(), options.local_world_size), take(env::read_restarts(), options.recovery)}) {
    if (!read) return read.error();
  }
  for (Status read : {take_slurm(env::rank.name, "SLURM_PROCID", options.first_rank),
                      take_slurm(env::world_size.name, "SLURM_NTASKS", options.world_size)})
    if (!read) return read.error();
  if (std::int64_t{options.first_rank} + options.slots > options.world_size)
    return Error{"TROUPE_SLOTS " + std::to_string(options.slots) + " with RANK " + std::to_string(options.first_rank) +
                 " does not fit WORLD_SIZE " + std::to_string(options.world_size)};
  options.node_index = args.node_index;
  if (options.node_index < 0) {
    if (Status read = take(env::read_node_index(), options.node_index); !read) return read.error();
  }
  if (options.node_index < 0 && options.slots == 1) options.node_index = options.first_rank;
  std::optional<std::string> join_variable = args.join.empty() ? env::read_join() : std::nullopt;
  const auto master_addr = environment_text(env::master_addr.name), master_port = environment_text(env::master_port.name);
  std::string_view join_source = env::join.name;
  if (args.join.empty() && !join_variable && master_addr && master_port) {
    join_variable = *master_addr + ":" + *master_port;
    join_source = "MASTER_ADDR:MASTER_PORT";
  }
  const std::string join = join_variable.value_or(args.join);
  const auto colon = join.rfind(':');
  int port = 0;
  const char* port_end = join.data() + join.size();
  if (colon == std::string::npos || std::from_chars(join.data() + colon + 1, port_end, port).ptr != port_end ||
      port < 1 || port > 65535) {
    if (join_variable) return environment_error(join_source, "HOST:PORT", join);
    return Error{"--join '" + join + "' is not HOST:PORT"};
  }
  options.join_host = join.substr(0, colon);
  options.join_port = port;
  options.token = args.token.empty() ? env::read_token().value_or("") : args.token;
  return options;
}

}  // namespace

int run_node(const NodeArgs& args, const ResolvedJob& job) {
  auto options = node_options(args);
  if (!options) return error_exit(ExitCode::bad_input, options.error().message);
  auto gone = env::read_drill_node_gone();
  if (!gone) return error_exit(ExitCode::bad_input, gone.error().message);
  // `troupe drill node-lost`: node TROUPE_DRILL_NODE_GONE fails at every restart, as a machine
  // that does not come back would.
  if (options->recovery.restarts > 0 && *gone == options->node_index)
    return error_exit(ExitCode::failure, "drill: node " + std::to_string(options->node_index) + " cannot come back");
  options->host_name = launch::this_host_name();
  options->build_id = build_id();
  options->config_hash = config_hash(job.config);
  const actors::NodeOutcome outcome = actors::run_node_process(*options, job);
  if (outcome.exit_code != 0) {
    if (outcome.before_join) return error_exit(exit_code_of(outcome.exit_code), outcome.reason);
    std::fprintf(stderr, "troupe: node %d: %s\n", options->node_index, outcome.reason.c_str());
  }
  return outcome.exit_code;
}

}  // namespace troupe::apps
