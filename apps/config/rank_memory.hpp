#pragma once
// The memory each rank (worker) of a job may use: what this machine has left (launch::host_memory:
// MemAvailable, or what the process's cgroup still allows when that is less) shared evenly by the
// job's ranks on this machine, and --memory-limit when the user gives it: a limit lowers that
// share, never raises it (a rank here cannot use memory this machine does not have), and holds
// alone for ranks on other machines.

#include <optional>
#include <string>

#include "compute/expected.hpp"

namespace troupe::apps {

struct RankMemory {
  double bytes = 0;    // per rank
  std::string source;  // "--memory-limit", "MemAvailable / 2 ranks on this machine", ...
};

// --memory-limit's value in bytes ("6GiB", "512MiB", "2G", plain bytes), or one line naming it.
Expected<double> parse_memory_limit(const std::string& text);

// The smaller of `limit` and this machine's memory over `ranks_here` (the source says which, and
// when the share is the smaller, that it is below the limit). nullopt when there is no limit and no
// rank runs here (another machine's memory cannot be read from this one) or this machine's memory
// cannot be read.
std::optional<RankMemory> rank_memory(std::optional<double> limit, int ranks_here);

}  // namespace troupe::apps
