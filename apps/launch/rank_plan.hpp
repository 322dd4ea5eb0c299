#pragma once
// Rank assignment: which global and local ranks each node process hosts, and the variables that
// tell it so. Pure functions of the host entries, so every process could compute the same plan.
//
// A node process on line i hosts `slots` workers with global ranks first_rank … first_rank +
// slots − 1, where first_rank is the sum of the slots of lines 0 … i−1. LOCAL_RANK counts the same
// way but only over earlier lines on the same machine (local aliases count as one machine).

#include <string>
#include <string_view>
#include <vector>

#include "apps/launch/host_file.hpp"
#include "apps/launch/process_spec.hpp"
#include "compute/expected.hpp"

namespace troupe::launch {

struct NodePlan {
  int node_index = 0;
  std::string host;
  int slots = 0;
  bool local = false;        // the host is this machine
  int first_rank = 0;        // global rank of the node's first worker
  int local_rank_base = 0;   // local rank of its first worker: slots of earlier lines on its machine
  int local_world_size = 0;  // slots of every line on its machine
};

struct RankPlan {
  int world_size = 0;  // sum of all slots
  std::vector<NodePlan> nodes;
};

// Where node processes reach the job process, and the token they must present.
struct JobContact {
  std::string host;
  int port = 0;
  std::string token;
};

// The plan for hosts in file order; this_host decides which hosts are this machine.
RankPlan plan_ranks(const std::vector<HostEntry>& hosts, std::string_view this_host);

// This machine runs at most this many workers per CPU core: each worker trains with its own
// threads, and far beyond this count they only take turns (docs/formats/host-file.md).
inline constexpr int max_local_workers_per_cpu = 4;

// The workers of the plan's nodes on this machine (every local alias together).
int local_workers(const RankPlan& plan);

// Error, naming `origin` (the host file or --workers), when the plan puts more than
// max_local_workers_per_cpu × `cpus` workers on this machine.
Status check_local_workers(const RankPlan& plan, unsigned cpus, const std::string& origin);

// Error, naming `origin`, when the plan's simulated ranks on this machine would take more System V
// shared memory segments than the kernel has free: `per_rank` each (comm/sysv_segments.hpp), and as
// many again for the ranks of its largest node process there, whose process an in-place recovery
// starts again while the survivors still hold the lost one's segments. `in_use` and `limit`
// (kernel.shmmni) are the machine's counts.
Status check_local_sysv_segments(const RankPlan& plan, int per_rank, int in_use, int limit, const std::string& origin);

// The variables a node process is given, in this order: RANK, WORLD_SIZE, LOCAL_RANK,
// LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (the job process), TROUPE_NODE_INDEX, TROUPE_SLOTS,
// TROUPE_JOIN (HOST:PORT, IPv6 in brackets), TROUPE_TOKEN. RANK and LOCAL_RANK are those of the
// node's first worker.
Environment node_environment(const RankPlan& plan, const NodePlan& node, const JobContact& contact);

// One command per node: argv (the node program) with that node's environment.
std::vector<NodeProcessSpec> node_process_specs(const RankPlan& plan, const JobContact& contact,
                                       const std::vector<std::string>& argv);

}  // namespace troupe::launch
