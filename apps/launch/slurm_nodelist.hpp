#pragma once
// Slurm's compressed host lists, as in SLURM_JOB_NODELIST: `node[01-03,07],gpu5` names node01,
// node02, node03, node07 and gpu5. Under Slurm these are the hosts of the job, in this order.

#include <string>
#include <string_view>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::launch {

// The most hosts one node list may expand to.
inline constexpr std::size_t max_nodelist_hosts = 65536;

// Expands a node list: comma-separated items, each literal text with any number of bracket
// groups `[a-b,c]`; several groups multiply, the last varying fastest (`r[1-2]n[1-2]` is r1n1,
// r1n2, r2n1, r2n2). A range keeps the width of its lower bound (`[08-10]` is 08, 09, 10).
// Errors name the list and what is wrong: empty items, unbalanced or nested brackets, a range
// that is not `number` or `low-high` with low <= high, too many hosts.
Expected<std::vector<std::string>> expand_slurm_nodelist(std::string_view nodelist);

}  // namespace troupe::launch
