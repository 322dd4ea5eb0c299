// Filling batches: targets are the inputs shifted by one, the windows are the sampler's, a
// data-parallel split of a batch reads exactly the single-process batch, and the sequential
// validation windows walk the grid from the start and wrap.

#include <catch2/catch.hpp>
#include <cstdint>
#include <numeric>
#include <vector>

#include "compute/data/batch.hpp"

using namespace troupe::compute;

namespace {
// Token i has id i, so a window's first input says where it starts.
std::vector<std::uint16_t> position_tokens(std::size_t n) {
  std::vector<std::uint16_t> tokens(n);
  std::iota(tokens.begin(), tokens.end(), std::uint16_t{0});
  return tokens;
}
}  // namespace

TEST_CASE("fill_batch copies the sampler's windows, targets shifted by one", "[data]") {
  const int T = 16, B = 8;
  const auto tokens = position_tokens(5000);
  const WindowSampler sampler(tokens.size(), T, 77);
  std::vector<std::int32_t> inputs(B * T), targets(B * T);
  const std::uint64_t first = 307;  // S = 311: the batch spans the end of epoch 0 and the start of epoch 1
  fill_batch(inputs.data(), targets.data(), tokens, sampler, first, B);
  for (int b = 0; b < B; ++b) {
    const std::size_t start = sampler.window_start(first + b);
    for (int t = 0; t < T; ++t) {
      REQUIRE(inputs[b * T + t] == static_cast<std::int32_t>(start + t));
      REQUIRE(targets[b * T + t] == static_cast<std::int32_t>(start + t + 1));
    }
  }
}

TEST_CASE("fill_batch: n ranks of micro-batch b read the single-process batch of n*b", "[data]") {
  const int T = 8, b = 3, n = 4;
  const auto tokens = position_tokens(3000);
  const WindowSampler sampler(tokens.size(), T, 3);
  const std::uint64_t step = 17;
  std::vector<std::int32_t> whole_in(n * b * T), whole_tg(n * b * T);
  fill_batch(whole_in.data(), whole_tg.data(), tokens, sampler, step * n * b, n * b);
  for (int r = 0; r < n; ++r) {
    std::vector<std::int32_t> in(b * T), tg(b * T);
    fill_batch(in.data(), tg.data(), tokens, WindowSampler(tokens.size(), T, 3), step * n * b + r * b, b);
    CHECK(std::equal(in.begin(), in.end(), whole_in.begin() + r * b * T));
    CHECK(std::equal(tg.begin(), tg.end(), whole_tg.begin() + r * b * T));
  }
}

TEST_CASE("fill_sequential_batch walks the unshifted grid and wraps", "[data]") {
  const int T = 4;
  const auto tokens = position_tokens(14);  // windows start at 0, 4, 8 (the last ends at token 12)
  REQUIRE(sequential_windows(tokens.size(), T) == 3);
  std::vector<std::int32_t> inputs(5 * T), targets(5 * T);
  fill_sequential_batch(inputs.data(), targets.data(), tokens, T, 1, 5);
  const std::vector<std::int32_t> firsts = {4, 8, 0, 4, 8};
  for (int b = 0; b < 5; ++b) {
    CHECK(inputs[b * T] == firsts[b]);
    for (int t = 0; t < T; ++t) CHECK(targets[b * T + t] == inputs[b * T + t] + 1);
  }
}
