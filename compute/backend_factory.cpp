#include "compute/backend.hpp"
#include "compute/cpu/cpu_backend.hpp"
#include "compute/sim/sim_backend.hpp"
#ifdef TROUPE_HAVE_CUDA
#include "compute/cuda/cuda_backend.hpp"
#endif

namespace troupe::compute {

Expected<std::unique_ptr<Backend>> make_backend(BackendKind kind, Precision precision, int threads,
                                                const SimOptions& sim) {
  if (threads < 0) return Error{"thread count must be 0 (all cores) or positive, got " + std::to_string(threads)};
  if (kind == BackendKind::cpu) return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(threads, precision));
  if (kind == BackendKind::sim) {
    if (precision != Precision::fp32)
      return Error{"train.precision " + std::string(precision_name(precision)) +
                   ": the sim backend models fp32 products only; use train.precision fp32 with train.backend sim"};
    return std::unique_ptr<Backend>(std::make_unique<SimBackend>(sim));
  }
#ifdef TROUPE_HAVE_CUDA
  auto backend = CudaBackend::create(precision);
  if (!backend) return backend.error();
  return std::unique_ptr<Backend>(std::move(*backend));
#else
  return Error{"backend '" + std::string(backend_name(kind)) +
               "': this build has no CUDA support (no nvcc, cuBLAS and NCCL under /usr/local/cuda at configure time)"};
#endif
}

}  // namespace troupe::compute
