#pragma once
// The hosts of a Slurm allocation, as `troupe launch` takes them when it runs inside one without
// --hostfile: every node of SLURM_JOB_NODELIST once, in its order, with the tasks Slurm gives it
// as its slots (one node process per node, one rank per task), and srun as the launcher.

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "apps/launch/host_file.hpp"
#include "apps/launch/launch_template.hpp"
#include "compute/expected.hpp"

namespace troupe::launch {

// An environment variable's value, nothing when unset (getenv in the program, a table in tests).
using VariableLookup = std::function<std::optional<std::string>(std::string_view name)>;

struct SlurmAllocation {
  std::vector<HostEntry> hosts;
  std::string source;  // "SLURM_JOB_NODELIST=node[1-2], SLURM_TASKS_PER_NODE=2(x2)": where they came from
};

// The allocation's hosts; nothing when SLURM_JOB_NODELIST is unset (not inside an allocation).
// Slots per node: SLURM_NTASKS_PER_NODE (one count for every node) if set, else
// SLURM_TASKS_PER_NODE (Slurm's compressed counts, "2(x3),1": 2 on each of three nodes, then 1),
// else 1. An error names the variable and its value.
std::optional<Expected<SlurmAllocation>> slurm_allocation(const VariableLookup& variable);

// Slurm's compressed tasks per node ("2(x3),1") for `nodes` nodes, in order.
Expected<std::vector<int>> expand_tasks_per_node(std::string_view text, std::size_t nodes);

// `srun --nodes=1 --ntasks=1 -w {host} sh -c {command}`: one job step on that node running the
// node's command (srun runs argv, not a shell line, hence sh -c).
LaunchTemplate srun_template();

}  // namespace troupe::launch
