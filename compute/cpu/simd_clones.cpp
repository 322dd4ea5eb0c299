#include "compute/cpu/simd_clones.hpp"

#include <cstdint>

#include "compute/check.hpp"

// A marked function that returns where it runs, and its three clones by the names GCC gives them
// (the function's assembler name, a dot, the clone's target). The running clone is the one whose
// start lies closest below that address. extern "C": the assembler names are the plain names.
extern "C" TROUPE_SIMD_CLONES const void* troupe_simd_clone_probe() {
  const void* here;
  asm volatile("lea 0(%%rip), %0" : "=r"(here));
  return here;
}
extern "C" const void* troupe_simd_clone_probe_avx512() __asm__("troupe_simd_clone_probe.avx512f");
extern "C" const void* troupe_simd_clone_probe_avx2() __asm__("troupe_simd_clone_probe.arch_x86_64_v3");
extern "C" const void* troupe_simd_clone_probe_baseline() __asm__("troupe_simd_clone_probe.default");

namespace troupe::compute::cpu {

SimdClone simd_clone_in_use() {
  const auto here = reinterpret_cast<std::uintptr_t>(troupe_simd_clone_probe());
  struct Start {
    SimdClone clone;
    std::uintptr_t address;
  };
  const Start starts[] = {
      {SimdClone::avx512, reinterpret_cast<std::uintptr_t>(&troupe_simd_clone_probe_avx512)},
      {SimdClone::avx2, reinterpret_cast<std::uintptr_t>(&troupe_simd_clone_probe_avx2)},
      {SimdClone::baseline, reinterpret_cast<std::uintptr_t>(&troupe_simd_clone_probe_baseline)},
  };
  const Start* running = nullptr;
  for (const Start& start : starts) {
    if (start.address <= here && (running == nullptr || start.address > running->address)) running = &start;
  }
  TROUPE_CHECK(running != nullptr, "the probe runs below all three of its clones");
  return running->clone;
}

SimdClone simd_clone_expected() {
  if (__builtin_cpu_supports("avx512f")) return SimdClone::avx512;
  if (__builtin_cpu_supports("x86-64-v3")) return SimdClone::avx2;
  return SimdClone::baseline;
}

const char* simd_clone_name(SimdClone clone) {
  switch (clone) {
    case SimdClone::avx512:
      return "AVX-512";
    case SimdClone::avx2:
      return "AVX2";
    case SimdClone::baseline:
      return "SSE2";
  }
  return "?";
}

}  // namespace troupe::compute::cpu
