// troupe node: one node process of a job (actors/worker/node_process.hpp). The job's address,
// token and node index come from the flags or from TROUPE_JOIN / TROUPE_TOKEN /
// TROUPE_NODE_INDEX, the node's ranks from RANK, TROUPE_SLOTS and WORLD_SIZE, all of which
// troupe launch sets.

#include <cstdio>
#include <cstdlib>

#include "actors/worker/node_process.hpp"
#include "apps/commands/commands.hpp"
#include "apps/commands/job_identity.hpp"
#include "apps/exit_codes.hpp"
#include "apps/launch/local_host.hpp"

namespace troupe::apps {
namespace {

int env_int(const char* name, int fallback) {
  const char* value = std::getenv(name);
  return value ? std::atoi(value) : fallback;
}

}  // namespace

int run_node(const NodeArgs& args, const ResolvedJob& job) {
  actors::NodeProcessOptions options;
  options.first_rank = env_int("RANK", 0);
  options.world_size = env_int("WORLD_SIZE", 1);
  options.slots = env_int("TROUPE_SLOTS", 1);
  if (options.slots < 1 || options.first_rank < 0 || options.first_rank + options.slots > options.world_size)
    return error_exit(ExitCode::bad_input, "TROUPE_SLOTS " + std::to_string(options.slots) + " with RANK " +
                                               std::to_string(options.first_rank) + " does not fit WORLD_SIZE " +
                                               std::to_string(options.world_size));
  auto recovery = actors::RecoveryCounts::from_environment();
  if (!recovery) return error_exit(ExitCode::bad_input, recovery.error().message);
  // `troupe drill node-lost`: node TROUPE_DRILL_NODE_GONE fails at every restart, as a machine
  // that does not come back would.
  if (recovery->restarts > 0 && env_int("TROUPE_DRILL_NODE_GONE", -1) == args.node_index)
    return error_exit(ExitCode::failure, "drill: node " + std::to_string(args.node_index) + " cannot come back");
  const auto colon = args.join.rfind(':');
  if (colon == std::string::npos) return error_exit(ExitCode::bad_input, "--join '" + args.join + "' is not HOST:PORT");
  options.join_host = args.join.substr(0, colon);
  options.join_port = std::atoi(args.join.c_str() + colon + 1);
  options.token = args.token;
  options.node_index = args.node_index;
  options.host_name = launch::this_host_name();
  options.build_id = build_id();
  options.config_hash = config_hash(job.config);
  options.local_rank_base = env_int("LOCAL_RANK", 0);
  options.local_world_size = env_int("LOCAL_WORLD_SIZE", 1);
  options.recovery = std::move(*recovery);
  const actors::NodeOutcome outcome = actors::run_node_process(options, job);
  if (outcome.exit_code != 0) {
    if (outcome.before_join) return error_exit(exit_code_of(outcome.exit_code), outcome.reason);
    std::fprintf(stderr, "troupe: node %d: %s\n", args.node_index, outcome.reason.c_str());
  }
  return outcome.exit_code;
}

}  // namespace troupe::apps
