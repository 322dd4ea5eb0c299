#include "apps/bench/bench_figures.hpp"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "compute/check.hpp"
#include "compute/random.hpp"

namespace troupe::apps {

std::vector<std::uint16_t> bench_tokens(const compute::GPTConfig& config, std::size_t count) {
  std::vector<std::uint16_t> tokens(count);
  for (std::size_t i = 0; i < count; ++i)
    tokens[i] = static_cast<std::uint16_t>(compute::splitmix64(i) % static_cast<std::uint64_t>(config.vocab_size));
  return tokens;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double mib(double bytes) { return bytes / (1024.0 * 1024.0); }

double median(std::vector<double> values) {
  TROUPE_CHECK(!values.empty(), "median of nothing");
  std::sort(values.begin(), values.end());
  const std::size_t half = values.size() / 2;
  return values.size() % 2 == 1 ? values[half] : (values[half - 1] + values[half]) / 2;
}

std::vector<std::uint8_t> pack_figures(const std::vector<double>& values) {
  std::vector<std::uint8_t> bytes(values.size() * sizeof(double));
  if (!values.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<double> unpack_figures(const std::vector<std::uint8_t>& bytes) {
  std::vector<double> values(bytes.size() / sizeof(double));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(double));
  return values;
}

double load_average() {
  double load = 0;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &load) != 1) load = 0;
    std::fclose(f);
  }
  return load;
}

}  // namespace troupe::apps
