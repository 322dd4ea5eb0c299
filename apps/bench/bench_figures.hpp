#pragma once
// What the bench commands share: the tokens they train on, the median of a run's figures, their
// clock and units, and a rank's figures as the bytes its report carries back to the parent process
// (comm::run_local_ranks).

#include <chrono>
#include <cstdint>
#include <vector>

#include "compute/model/gpt_config.hpp"

namespace troupe::apps {

// `count` tokens of `config`'s vocabulary, a pure function of the position (no corpus to read):
// what every bench trains on, so its runs and their references see the same data.
std::vector<std::uint16_t> bench_tokens(const compute::GPTConfig& config, std::size_t count);

// The middle value, or the mean of the two middle ones; values must not be empty.
double median(std::vector<double> values);

// The machine's load average over the last minute (/proc/loadavg; 0 where it cannot be read), which
// a bench prints beside figures measured on a machine others may share.
double load_average();

// Seconds from `start` to now on the steady clock, which every bench times with.
double seconds_since(std::chrono::steady_clock::time_point start);

// Bytes in MiB, the unit a bench prints memory in.
double mib(double bytes);

std::vector<std::uint8_t> pack_figures(const std::vector<double>& values);
std::vector<double> unpack_figures(const std::vector<std::uint8_t>& bytes);

}  // namespace troupe::apps
