#pragma once
// OpenBLAS is process-wide state (its kernel set and its thread count); this is the one place
// that touches it.

#include <string>

namespace troupe::compute::cpu {

// Makes sure OpenBLAS runs kernels that fit this CPU (once per process), then sets its thread
// count. The count is process-wide: the last backend constructed decides it.
void configure_openblas(int threads);

// The kernel set OpenBLAS runs, e.g. "SkylakeX" or "Haswell".
std::string openblas_core();

}  // namespace troupe::compute::cpu
