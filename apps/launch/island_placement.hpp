#pragma once
// DiLoCo islands mapped to hosts by name: a host file whose node lines say `island=K` places each
// island's ranks on its own lines, so an island can be one site or one rack across the slow link.
// The grid decides which island a rank is in (comm::island_of: under pipeline stages an island's
// ranks are not consecutive); this orders the node lines so that every line's ranks lie in the
// island it names. Documented in docs/formats/host-file.md, "Islands".

#include <string>
#include <string_view>
#include <vector>

#include "apps/launch/host_file.hpp"
#include "compute/expected.hpp"

namespace troupe::launch {

// The node lines in the order that gives each line's ranks its island: rank by rank, the next line
// of the rank's island in file order. island_of_rank[r] is rank r's island, of `islands` in all;
// every node line names one (HostEntry::island). Errors name the origin and, where one line is at
// fault, its line: an island out of range, an island without a line, an island's lines holding
// another number of ranks than the island has, a line whose ranks would cross into another island.
Expected<std::vector<HostEntry>> place_islands(const std::vector<HostEntry>& nodes,
                                               const std::vector<int>& island_of_rank, int islands,
                                               std::string_view origin);

// One line for the job's log: which lines (and hosts) hold each island, in island order.
std::string describe_island_placement(const std::vector<HostEntry>& placed, int islands);

}  // namespace troupe::launch
