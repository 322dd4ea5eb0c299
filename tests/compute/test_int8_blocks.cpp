// DiLoCo's int8 pseudo-gradient payload (compute/train/int8_blocks.hpp) on its own: its size and
// layout, the rounding error bound, a zero block, a short last block, a non-finite value, and the
// decoded payloads added in order.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "compute/random.hpp"
#include "compute/train/int8_blocks.hpp"

using namespace troupe::compute;

namespace {

std::vector<float> values(std::int64_t n, std::uint64_t seed, float scale) {
  std::vector<float> v(static_cast<std::size_t>(n));
  for (std::int64_t i = 0; i < n; ++i)
    v[static_cast<std::size_t>(i)] =
        scale * static_cast<float>(uniform_open0(hash_combine(seed, static_cast<std::uint64_t>(i))) - 0.5);
  return v;
}

std::vector<std::byte> encoded(const std::vector<float>& v) {
  std::vector<std::byte> payload(static_cast<std::size_t>(int8_blocks_bytes(static_cast<std::int64_t>(v.size()))));
  encode_int8_blocks(v.data(), static_cast<std::int64_t>(v.size()), payload.data());
  return payload;
}

float scale_of_block(const std::vector<std::byte>& payload, std::int64_t block) {
  float scale = 0.0f;
  std::memcpy(&scale, payload.data() + block * (4 + int8_block_values), sizeof scale);
  return scale;
}

}  // namespace

TEST_CASE("int8 blocks: a scale per 256 values then the values, 1 + 4/256 bytes a value", "[diloco]") {
  CHECK(int8_blocks_bytes(0) == 0);
  CHECK(int8_blocks_bytes(1) == 5);
  CHECK(int8_blocks_bytes(256) == 260);
  CHECK(int8_blocks_bytes(257) == 265);
  CHECK(int8_blocks_bytes(1000) == 4 * 4 + 1000);
  // The first block's largest magnitude is 2.54, so its scale is 0.02 and 1.0 is 50 steps of it.
  std::vector<float> v(300, 0.0f);
  v[3] = -2.54f;
  v[7] = 1.0f;
  v[299] = 0.5f;  // alone in the short second block: it is its block's largest, 127 steps
  const std::vector<std::byte> payload = encoded(v);
  CHECK(scale_of_block(payload, 0) == -(-2.54f) / 127.0f);
  CHECK(static_cast<std::int8_t>(payload[4 + 3]) == -127);
  CHECK(static_cast<std::int8_t>(payload[4 + 7]) == static_cast<std::int8_t>(std::nearbyint(1.0f / (2.54f / 127.0f))));
  CHECK(scale_of_block(payload, 1) == 0.5f / 127.0f);
  CHECK(static_cast<std::int8_t>(payload[260 + 4 + 43]) == 127);
}

TEST_CASE("int8 blocks: every decoded value is within half its block's scale", "[diloco]") {
  for (std::int64_t n : {1, 255, 256, 257, 1000, 4096}) {
    INFO("n " << n);
    const std::vector<float> v = values(n, 11 + static_cast<std::uint64_t>(n), 3.0f);
    const std::vector<std::byte> payload = encoded(v);
    std::vector<float> back(v.size(), 42.0f);
    add_int8_blocks(payload.data(), n, back.data(), true);
    for (std::int64_t i = 0; i < n; ++i) {
      const float scale = scale_of_block(payload, i / int8_block_values);
      CHECK(scale > 0.0f);
      CHECK(std::fabs(back[static_cast<std::size_t>(i)] - v[static_cast<std::size_t>(i)]) <= 0.5f * scale * 1.0001f);
    }
  }
}

TEST_CASE("int8 blocks: zeros stay zero and a non-finite value decodes to NaN, only in its block", "[diloco]") {
  std::vector<float> v(512, 0.0f);
  v[300] = std::numeric_limits<float>::infinity();
  v[301] = 1.0f;
  const std::vector<std::byte> payload = encoded(v);
  CHECK(scale_of_block(payload, 0) == 0.0f);
  std::vector<float> back(v.size(), 0.0f);
  add_int8_blocks(payload.data(), 512, back.data(), true);
  for (int i = 0; i < 256; ++i) CHECK(back[static_cast<std::size_t>(i)] == 0.0f);
  CHECK(std::isnan(back[300]));
  CHECK(std::isnan(back[301]));
}

TEST_CASE("int8 blocks: payloads added in order equal the decoded values' sum in that order", "[diloco]") {
  const std::int64_t n = 700;
  const std::vector<float> a = values(n, 1, 1.0f), b = values(n, 2, 0.01f), c = values(n, 3, 100.0f);
  std::vector<float> sum(static_cast<std::size_t>(n)), da(sum), db(sum), dc(sum);
  const auto pa = encoded(a), pb = encoded(b), pc = encoded(c);
  add_int8_blocks(pa.data(), n, da.data(), true);
  add_int8_blocks(pb.data(), n, db.data(), true);
  add_int8_blocks(pc.data(), n, dc.data(), true);
  add_int8_blocks(pa.data(), n, sum.data(), true);
  add_int8_blocks(pb.data(), n, sum.data(), false);
  add_int8_blocks(pc.data(), n, sum.data(), false);
  for (std::size_t i = 0; i < sum.size(); ++i) CHECK(sum[i] == (da[i] + db[i]) + dc[i]);
}
