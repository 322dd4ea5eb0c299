#pragma once
// A series as one line of Unicode block characters (▁▂▃▄▅▆▇█), lowest to highest, for the
// shell's `loss`: a curve that reads at a glance in any terminal.

#include <cstddef>
#include <string>
#include <vector>

namespace troupe::monitor {

// One character per value, or per an equal share of them (their mean) when there are more than
// `width`; a flat series is all ▄. Empty for no values.
std::string sparkline(const std::vector<double>& values, std::size_t width);

}  // namespace troupe::monitor
