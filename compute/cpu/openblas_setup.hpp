#pragma once
// OpenBLAS is process-wide state (its kernel set and its thread count); this is the one place
// that touches it.

#include <string>

namespace troupe::compute::cpu {

// Makes sure OpenBLAS runs kernels that fit this CPU (once per process), then sets its thread
// count. The count is process-wide: the last backend constructed decides it.
void configure_openblas(int threads);

// Sets OpenBLAS' thread count to `during` for this object's life where `active`, then back to
// `after`. The attention's per-head GEMMs run side by side on the backend's own threads, one
// OpenBLAS thread each: a threaded call would want the cores the team already keeps busy.
// Process-wide, like configure_openblas.
class OpenblasThreadsWhile {
 public:
  OpenblasThreadsWhile(int during, int after, bool active);
  ~OpenblasThreadsWhile();
  OpenblasThreadsWhile(const OpenblasThreadsWhile&) = delete;
  OpenblasThreadsWhile& operator=(const OpenblasThreadsWhile&) = delete;

 private:
  int after_;
  bool active_;
};

// The kernel set OpenBLAS runs, e.g. "SkylakeX" or "Haswell".
std::string openblas_core();

}  // namespace troupe::compute::cpu
