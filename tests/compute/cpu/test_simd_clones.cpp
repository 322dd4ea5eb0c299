// The hot loops' clone (compute/cpu/simd_clones.hpp) is picked by the CPU's features: the clone the
// loader picked is the one they call for, so a CPU at the x86-64-v3 level without AVX-512 (every
// AMD Zen, Intel's client cores) runs the AVX2 clone, not the SSE2 baseline.

#include <catch2/catch.hpp>

#include "compute/cpu/simd_clones.hpp"

using troupe::compute::cpu::simd_clone_expected;
using troupe::compute::cpu::simd_clone_in_use;
using troupe::compute::cpu::simd_clone_name;
using troupe::compute::cpu::SimdClone;

TEST_CASE("simd clones: the loop clone this machine runs is the widest its CPU features allow") {
  const SimdClone in_use = simd_clone_in_use();
  INFO("running " << simd_clone_name(in_use) << ", features call for " << simd_clone_name(simd_clone_expected()));
  CHECK(in_use == simd_clone_expected());
  // The probe is stable: the resolver ran once, at load.
  CHECK(simd_clone_in_use() == in_use);
}
