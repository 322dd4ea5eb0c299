#pragma once
// What the bench commands share: the median of a run's figures, and a rank's figures as the bytes
// its report carries back to the parent process (comm::run_local_ranks).

#include <cstdint>
#include <vector>

namespace troupe::apps {

// The middle value, or the mean of the two middle ones; values must not be empty.
double median(std::vector<double> values);

std::vector<std::uint8_t> pack_figures(const std::vector<double>& values);
std::vector<double> unpack_figures(const std::vector<std::uint8_t>& bytes);

}  // namespace troupe::apps
