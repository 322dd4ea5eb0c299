#include "compute/backend.hpp"
#include "compute/cpu/cpu_backend.hpp"

namespace troupe::compute {

Expected<std::unique_ptr<Backend>> make_backend(const std::string& name, int threads) {
  if (threads < 0) return Error{"thread count must be 0 (all cores) or positive, got " + std::to_string(threads)};
  if (name == "cpu") return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(threads));
  if (name == "cuda") {
#ifdef TROUPE_HAVE_CUDA
    return Error{"backend 'cuda': this build found the CUDA toolkit, but the CUDA kernels arrive with the GPU issue; use 'cpu'"};
#else
    return Error{"backend 'cuda': this build has no CUDA support (no nvcc, cuBLAS and NCCL under /usr/local/cuda at configure time)"};
#endif
  }
  return Error{"unknown backend '" + name + "' (known: cpu, cuda)"};
}

}  // namespace troupe::compute
