#include "compute/train/int8_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace troupe::compute {
namespace {

constexpr std::int64_t scale_bytes = static_cast<std::int64_t>(sizeof(float));

std::int64_t block_count(std::int64_t count) { return (count + int8_block_values - 1) / int8_block_values; }

}  // namespace

std::int64_t int8_blocks_bytes(std::int64_t count) { return block_count(count) * scale_bytes + count; }

void encode_int8_blocks(const float* from, std::int64_t count, std::byte* to) {
  for (std::int64_t begin = 0; begin < count; begin += int8_block_values) {
    const std::int64_t n = std::min(int8_block_values, count - begin);
    float largest = 0.0f;
    for (std::int64_t i = 0; i < n; ++i) {
      const float magnitude = std::fabs(from[begin + i]);
      largest = std::isfinite(magnitude) ? std::max(largest, magnitude) : magnitude;
      if (!std::isfinite(largest)) break;
    }
    const float scale = std::isfinite(largest) ? largest / 127.0f : std::numeric_limits<float>::quiet_NaN();
    std::memcpy(to, &scale, sizeof scale);
    auto* values = reinterpret_cast<std::int8_t*>(to + scale_bytes);
    for (std::int64_t i = 0; i < n; ++i) {
      // |x| ≤ 127·scale, so the rounded quotient is within [-127, 127]; a zero block stays 0.
      const float q = scale > 0.0f ? std::nearbyint(from[begin + i] / scale) : 0.0f;
      values[i] = static_cast<std::int8_t>(std::clamp(q, -127.0f, 127.0f));
    }
    to += scale_bytes + n;
  }
}

void add_int8_blocks(const std::byte* from, std::int64_t count, float* sum, bool first) {
  for (std::int64_t begin = 0; begin < count; begin += int8_block_values) {
    const std::int64_t n = std::min(int8_block_values, count - begin);
    float scale = 0.0f;
    std::memcpy(&scale, from, sizeof scale);
    const auto* values = reinterpret_cast<const std::int8_t*>(from + scale_bytes);
    for (std::int64_t i = 0; i < n; ++i) {
      const float value = static_cast<float>(values[i]) * scale;
      sum[begin + i] = first ? value : sum[begin + i] + value;
    }
    from += scale_bytes + n;
  }
}

}  // namespace troupe::compute
