// OpenBLAS built with DYNAMIC_ARCH (as Debian ships it) picks its kernels at load time from
// the CPU's family and model number. A CPU newer than the library is not in its table and
// gets the SSE3 "Prescott" fallback: on a Sapphire/Emerald Rapids core, OpenBLAS 0.3.21 then
// runs sgemm at ~27 GFLOP/s instead of ~100-150 with its AVX-512 kernels. Training time is
// almost all sgemm, so this one choice outweighs every other kernel in this folder.
//
// The repair re-runs OpenBLAS's own dispatch with the core type named, exactly what the
// OPENBLAS_CORETYPE variable does at load, through the exported gotoblas_dynamic_quit/init:
//   step 0: leave everything alone if the user set OPENBLAS_CORETYPE or the core is modern;
//   step 1: pick the core the CPU's features allow (AVX-512 → SkylakeX, AVX2+FMA → Haswell);
//   step 2: quit the dispatch, set the variable, init again, and unset the variable.
// It runs once, when the first CpuBackend is built, before any gemm. The symbols are weak so a
// build of OpenBLAS without DYNAMIC_ARCH (which lacks them) links and is left as it is.
//
// A second repair at the same moment: after each threaded call OpenBLAS's pool threads spin for
// 2^OPENBLAS_THREAD_TIMEOUT cycles (2^28 by default, about 0.1 s) before they sleep. Every gemm of
// a step is followed by the backend's own thread team (attention, GELU, LayerNorm, AdamW), which
// then shares its cores with spinning threads: on 2 cores the team's ops ran no faster on 2
// threads than on 1. Unless the user set the variable, the spin is cut to 2^12 cycles the way
// OpenBLAS reads it (openblas_read_env), and the pool is shut down (blas_thread_shutdown_, the
// call OpenBLAS makes itself before a fork) so that the next threaded call starts it afresh with
// the shorter spin.

#include "compute/cpu/openblas_setup.hpp"

#include <cblas.h>

#include <array>
#include <cstdlib>
#include <mutex>
#include <string_view>

extern "C" {
__attribute__((weak)) void gotoblas_dynamic_init(void);
__attribute__((weak)) void gotoblas_dynamic_quit(void);
__attribute__((weak)) void openblas_read_env(void);
__attribute__((weak)) int blas_thread_shutdown_(void);
}

namespace troupe::compute::cpu {
namespace {

// OpenBLAS' generic x86-64 kernel sets, which it falls back to for CPUs it does not know.
bool is_fallback_core(std::string_view core) {
  constexpr std::array<std::string_view, 5> fallbacks{"Prescott", "Core2", "Penryn", "Nehalem", "Sandybridge"};
  for (auto f : fallbacks) {
    if (core == f) return true;
  }
  return false;
}

const char* best_core_for_cpu() {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

void repair_core_choice() {
  if (gotoblas_dynamic_init == nullptr || gotoblas_dynamic_quit == nullptr) return;
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || !is_fallback_core(openblas_core())) return;
  const char* core = best_core_for_cpu();
  if (core == nullptr) return;
  gotoblas_dynamic_quit();
  setenv("OPENBLAS_CORETYPE", core, 1);
  gotoblas_dynamic_init();
  unsetenv("OPENBLAS_CORETYPE");
}

void shorten_pool_spin() {
  if (openblas_read_env == nullptr || blas_thread_shutdown_ == nullptr) return;
  if (std::getenv("OPENBLAS_THREAD_TIMEOUT") != nullptr) return;
  setenv("OPENBLAS_THREAD_TIMEOUT", "12", 1);
  openblas_read_env();
  unsetenv("OPENBLAS_THREAD_TIMEOUT");
  blas_thread_shutdown_();
}

}  // namespace

void configure_openblas(int threads) {
  static std::once_flag once;
  std::call_once(once, [] {
    repair_core_choice();
    shorten_pool_spin();
  });
  openblas_set_num_threads(threads);
}

OpenblasThreadsWhile::OpenblasThreadsWhile(int during, int after, bool active) : after_(after), active_(active) {
  if (active_) openblas_set_num_threads(during);
}

OpenblasThreadsWhile::~OpenblasThreadsWhile() {
  if (active_) openblas_set_num_threads(after_);
}

std::string openblas_core() { return openblas_get_corename(); }

}  // namespace troupe::compute::cpu
