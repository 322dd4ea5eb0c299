#pragma once
// What the comm tests that run real ranks share: deterministic inputs that make summation
// order visible, a hash of result bytes, packing a rank's report, the error of a wrong figure, and
// running ranks through
// the local bootstrap with every rank required to succeed.

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "comm/bootstrap.hpp"
#include "comm/collectives.hpp"
#include "support/scoped_env.hpp"

namespace troupe::comm::test {

// What a rank returns when a figure it checks is not the one it should be.
inline Error wrong(const char* what, std::uint64_t got, std::uint64_t want) {
  return Error{std::string(what) + ": got " + std::to_string(got) + ", want " + std::to_string(want)};
}

inline std::uint64_t mix(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Rank `rank`'s element i: a float in ±[2^-8, 2^8), signs and magnitudes mixed so that a
// different summation order gives different bits.
inline float input_value(int rank, std::int64_t i) {
  const std::uint64_t h = mix((static_cast<std::uint64_t>(rank) << 40) ^ static_cast<std::uint64_t>(i));
  const float unit = static_cast<float>(h >> 40) / static_cast<float>(1 << 24) * 2.0f - 1.0f;
  return std::ldexp(unit, static_cast<int>(h & 15) - 7);
}

inline std::uint64_t hash_bytes(const void* data, std::size_t bytes) {
  const auto* p = static_cast<const unsigned char*>(data);
  std::uint64_t h = 1469598103934665603ull;
  std::size_t i = 0;
  for (; i + 8 <= bytes; i += 8) {
    std::uint64_t word;
    std::memcpy(&word, p + i, 8);
    h = (h ^ word) * 1099511628211ull;
  }
  for (; i < bytes; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

template <typename T>
std::vector<std::uint8_t> pack(const std::vector<T>& values) {
  std::vector<std::uint8_t> bytes(values.size() * sizeof(T));
  if (!bytes.empty()) std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

template <typename T>
std::vector<T> unpack(const std::vector<std::uint8_t>& bytes) {
  std::vector<T> values(bytes.size() / sizeof(T));
  if (!values.empty()) std::memcpy(values.data(), bytes.data(), values.size() * sizeof(T));
  return values;
}

// Sets an environment variable for the ranks forked while it lives, then restores it.
using troupe::test::ScopedEnv;

// Runs `body` on `ranks` processes (simulated ranks' engines with a `wire` model); every rank
// must report success. Returns the reports.
inline std::vector<std::vector<std::uint8_t>> run_ranks(int ranks, const LocalRankBody& body,
                                                        std::chrono::seconds timeout = std::chrono::seconds(30),
                                                        const std::optional<WireModel>& wire = std::nullopt) {
  auto results = run_local_ranks(ranks, body, timeout, {}, wire);
  REQUIRE(results.ok());
  std::vector<std::vector<std::uint8_t>> reports;
  for (int r = 0; r < ranks; ++r) {
    const LocalRankResult& result = (*results)[r];
    INFO("rank " << r << " of " << ranks << ": " << result.error);
    REQUIRE(result.ok);
    REQUIRE(result.exit_code == 0);
    reports.push_back(result.report);
  }
  return reports;
}

// The communicator every rank of a test builds: the whole world as one group.
inline Expected<std::unique_ptr<Communicator>> world(
    Engine& engine, CollectiveOptions options = CollectiveOptions::from_environment()) {
  Group group{0, {}};
  for (int r = 0; r < engine.world_size(); ++r) group.ranks.push_back(r);
  return Communicator::create(engine, group, options);
}

}  // namespace troupe::comm::test
