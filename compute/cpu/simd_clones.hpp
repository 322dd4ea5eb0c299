#pragma once
// The run-time ISA dispatch of hot loops. Binaries must run on any x86-64, so nothing is built
// with -march; a loop marked TROUPE_SIMD_CLONES is compiled three times (AVX-512, AVX2 with FMA,
// baseline SSE2) and an ifunc resolver picks one when the program loads. The choice is fixed per
// machine, so results stay bitwise reproducible on it.
//
// The middle clone is named by the x86-64-v3 level (AVX2, FMA, BMI2, ...), which the resolver
// tests by CPU features. `arch=haswell` would be tested by CPU model: taken on Intel's Haswell
// family alone, it left every AMD CPU, and every Intel one of another model without AVX-512, on
// the SSE2 baseline.

#define TROUPE_SIMD_CLONES __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))

namespace troupe::compute::cpu {

enum class SimdClone { avx512, avx2, baseline };

// The clone the loader picked on this machine for every TROUPE_SIMD_CLONES function (the same
// resolver rule for each): found by asking a marked function which of its clones is running.
SimdClone simd_clone_in_use();
// What the CPU's features say it should be: avx512 with AVX-512F, avx2 at the x86-64-v3 level.
SimdClone simd_clone_expected();
const char* simd_clone_name(SimdClone clone);

}  // namespace troupe::compute::cpu
