#include "compute/data/window_sampler.hpp"

#include <algorithm>
#include <string>

#include "compute/check.hpp"
#include "compute/data/permutation.hpp"
#include "compute/random.hpp"

namespace troupe::compute {

WindowSampler::WindowSampler(std::size_t num_tokens, int T, std::uint64_t seed)
    : num_tokens_(num_tokens), T_(T), seed_(seed) {
  TROUPE_CHECK(T >= 1, "T = " + std::to_string(T));
  const auto t = static_cast<std::size_t>(T);
  TROUPE_CHECK(num_tokens >= t + 1,
               std::to_string(num_tokens) + " tokens cannot hold one window of " + std::to_string(t + 1));
  windows_per_epoch_ = num_tokens / t >= 2 ? num_tokens / t - 1 : 1;
  shift_range_ = std::min(t, num_tokens - windows_per_epoch_ * t);
}

std::uint64_t WindowSampler::epoch_key(std::uint64_t epoch) const { return hash_combine(seed_, epoch); }

std::size_t WindowSampler::epoch_shift(std::uint64_t epoch) const {
  return static_cast<std::size_t>(splitmix64(epoch_key(epoch) ^ 0x5348494654ull) % shift_range_);  // "SHIFT"
}

std::size_t WindowSampler::window_start(std::uint64_t global_index) const {
  const std::uint64_t epoch = global_index / windows_per_epoch_;
  const std::uint64_t i = global_index % windows_per_epoch_;
  const std::uint64_t order = permute_index(i, windows_per_epoch_, epoch_key(epoch));
  return epoch_shift(epoch) + static_cast<std::size_t>(T_) * static_cast<std::size_t>(order);
}

}  // namespace troupe::compute
