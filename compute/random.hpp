#pragma once
// Counter-based randomness: every value is a pure function of (seed, stream, index), so a
// parameter or a sample comes out the same whichever process, shard or resumed run asks for it.

#include <cmath>
#include <cstdint>
#include <numbers>

namespace troupe::compute {

// SplitMix64's finaliser: a bijective, well-mixed 64-bit hash.
constexpr std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

constexpr std::uint64_t hash_combine(std::uint64_t a, std::uint64_t b) { return splitmix64(a ^ splitmix64(b)); }

// Uniform in (0, 1]: never 0, so log() is safe.
inline double uniform_open0(std::uint64_t bits) { return (static_cast<double>(bits >> 11) + 1.0) * 0x1.0p-53; }

// Standard normal for (seed, stream, index) by Box-Muller on two hashed uniforms.
inline double counter_normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t index) {
  std::uint64_t base = hash_combine(hash_combine(seed, stream), index);
  double u1 = uniform_open0(splitmix64(base));
  double u2 = uniform_open0(splitmix64(base + 1));
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace troupe::compute
