// Token tensors (compute/tensor.hpp) and the sim backend that makes them: a token tensor of
// gibibytes reads as zeros and costs the process no resident memory, keeps being a token through
// its views, and the sim backend's copies and fills leave it unwritten; the sim's small tensors and
// its token ids stay ordinary ones.

#include <catch2/catch.hpp>

#include <cstdint>

#include "compute/memory_ledger.hpp"
#include "compute/resident_memory.hpp"
#include "compute/sim/sim_backend.hpp"

using namespace troupe::compute;

namespace {

constexpr std::int64_t mebibyte = 1 << 20;

}  // namespace

TEST_CASE("a token tensor of 4 GiB reads as zeros and is not resident", "[token]") {
  const std::uint64_t before = resident_bytes();
  const std::uint64_t counted_before = memory_ledger().report().total.bytes;
  Tensor t = Tensor::token({1 << 30}, DType::f32);
  CHECK(t.is_token());
  CHECK(t.nbytes() == std::size_t{4} << 30);
  const float* values = t.data_as<float>();
  // One read a page over the first 64 MiB: reads map the kernel's zero page, not memory.
  float sum = 0;
  for (std::int64_t i = 0; i < 64 * mebibyte / 4; i += 1024) sum += values[i];
  CHECK(sum == 0.0f);
  CHECK(resident_bytes() < before + 16 * mebibyte);
  CHECK(memory_ledger().report().total.bytes == counted_before);
  CHECK(t.describe() == "f32[1073741824] on cpu (token)");
}

TEST_CASE("a token tensor's views are tokens, and its elements' addresses say so while it lives", "[token]") {
  const void* first = nullptr;
  {
    Tensor t = Tensor::token({64, 1024}, DType::f32);
    first = t.data();
    CHECK(t.reshape({1024, 64}).is_token());
    CHECK(t.slice(100, {10, 10}).is_token());
    CHECK(t.rows(3, 5).is_token());
    // 256 KiB moves as a token message; a view under 64 KiB as bytes, as its receiver's buffer does.
    CHECK(t.moves_as_token());
    CHECK(t.rows(0, 16).moves_as_token());
    CHECK_FALSE(t.rows(0, 15).moves_as_token());
    // Code that holds elements by address (a checkpoint's held ranges) asks by address.
    CHECK(is_token_memory(t.data()));
    CHECK(is_token_memory(t.slice(64 * 1024 - 1, {1}).data()));
    CHECK_FALSE(is_token_memory(static_cast<const char*>(t.data()) + t.nbytes()));
  }
  CHECK_FALSE(is_token_memory(first));
  const Tensor ordinary = Tensor::zeros({4}, DType::f32);
  CHECK_FALSE(ordinary.is_token());
  CHECK_FALSE(is_token_memory(ordinary.data()));
}

TEST_CASE("the sim backend's large floating tensors are tokens and its small ones and token ids are not", "[token]") {
  SimBackend sim{SimOptions{}};
  const auto elements_at_threshold = static_cast<std::int64_t>(Tensor::token_bytes_from / 4);
  CHECK(sim.zeros({elements_at_threshold}, DType::f32).is_token());
  CHECK(sim.zeros({elements_at_threshold / 2}, DType::bf16).is_token() == false);
  CHECK_FALSE(sim.zeros({elements_at_threshold - 1}, DType::f32).is_token());
  CHECK_FALSE(sim.zeros({elements_at_threshold * 16}, DType::i32).is_token());
  CHECK(sim.message_buffer({elements_at_threshold}, DType::f32).is_token());
}

TEST_CASE("the sim backend's copies and fills leave a token tensor unwritten and charge its bytes", "[token]") {
  SimBackend sim{SimOptions{}};
  Tensor big = sim.zeros({256 * mebibyte}, DType::f32);  // 1 GiB
  Tensor other = sim.zeros({256 * mebibyte}, DType::f32);
  const std::uint64_t before = resident_bytes();
  const double charged_before = sim.modelled_seconds();
  sim.fill_zero(big);
  sim.copy(other, big);
  CHECK(resident_bytes() < before + 16 * mebibyte);
  // Three gibibytes through memory at the modelled 2 TB/s.
  CHECK(sim.modelled_seconds() - charged_before == Approx(3.0 * (1 << 30) / SimOptions{}.memory_bandwidth));

  // An ordinary sim tensor is still written: a copy's values arrive, a fill clears them.
  Tensor small = sim.zeros({16}, DType::f32), source = sim.zeros({16}, DType::f32);
  source.data_as<float>()[3] = 7.0f;
  sim.copy(small, source);
  CHECK(small.data_as<float>()[3] == 7.0f);
  sim.fill_zero(small);
  CHECK(small.data_as<float>()[3] == 0.0f);
}
