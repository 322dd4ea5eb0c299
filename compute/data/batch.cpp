#include "compute/data/batch.hpp"

#include <string>

#include "compute/check.hpp"

namespace troupe::compute {
namespace {

void copy_window(std::int32_t* inputs, std::int32_t* targets, std::span<const std::uint16_t> tokens, std::size_t start,
                 int T) {
  const std::uint16_t* src = tokens.data() + start;
  for (int t = 0; t < T; ++t) {
    inputs[t] = src[t];
    targets[t] = src[t + 1];
  }
}

}  // namespace

void fill_batch(std::int32_t* inputs, std::int32_t* targets, std::span<const std::uint16_t> tokens,
                const WindowSampler& sampler, std::uint64_t first_global_index, int batch) {
  TROUPE_CHECK(tokens.size() == sampler.num_tokens(), "sampler built for " + std::to_string(sampler.num_tokens()) +
                                                          " tokens, given " + std::to_string(tokens.size()));
  const int T = sampler.seq_len();
  for (int b = 0; b < batch; ++b) {
    const std::size_t start = sampler.window_start(first_global_index + static_cast<std::uint64_t>(b));
    copy_window(inputs + static_cast<std::size_t>(b) * T, targets + static_cast<std::size_t>(b) * T, tokens, start, T);
  }
}

std::size_t sequential_windows(std::size_t num_tokens, int T) {
  TROUPE_CHECK(T >= 1, "T = " + std::to_string(T));
  return num_tokens == 0 ? 0 : (num_tokens - 1) / static_cast<std::size_t>(T);
}

void fill_sequential_batch(std::int32_t* inputs, std::int32_t* targets, std::span<const std::uint16_t> tokens, int T,
                           std::uint64_t first_window, int batch) {
  const std::size_t windows = sequential_windows(tokens.size(), T);
  TROUPE_CHECK(windows >= 1,
               std::to_string(tokens.size()) + " tokens cannot hold one window of " + std::to_string(T + 1));
  for (int b = 0; b < batch; ++b) {
    const std::uint64_t window = (first_window + static_cast<std::uint64_t>(b)) % windows;
    copy_window(inputs + static_cast<std::size_t>(b) * T, targets + static_cast<std::size_t>(b) * T, tokens,
                static_cast<std::size_t>(window) * static_cast<std::size_t>(T), T);
  }
}

}  // namespace troupe::compute
