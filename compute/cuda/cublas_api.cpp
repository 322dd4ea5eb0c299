#include "compute/cuda/cublas_api.hpp"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace troupe::compute {
namespace {

// The sonames of the toolkit the build compiled against (CUBLAS_VER_MAJOR from its headers).
const std::string cublas_soname = "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR);
const std::string cublaslt_soname = "libcublasLt.so." + std::to_string(CUBLAS_VER_MAJOR);

struct Loaded {
  CublasApi api{};
  std::string error;  // empty when loaded
};

template <typename F>
bool bind(void* library, const char* symbol, F& target, std::string& error) {
  target = reinterpret_cast<F>(::dlsym(library, symbol));
  if (target == nullptr && error.empty()) error = std::string("symbol ") + symbol + " missing";
  return target != nullptr;
}

// By soname (LD_LIBRARY_PATH, ld.so.conf), else from the toolkit the build was configured with.
void* open_library(const std::string& soname, std::string& error) {
  if (void* found = ::dlopen(soname.c_str(), RTLD_NOW | RTLD_GLOBAL)) return found;
  if (void* found = ::dlopen((std::string(TROUPE_CUDA_LIBRARY_DIR) + "/" + soname).c_str(), RTLD_NOW | RTLD_GLOBAL))
    return found;
  const char* why = ::dlerror();
  error = "cannot load " + soname + " (nor from " + TROUPE_CUDA_LIBRARY_DIR + "): " + (why ? why : "unknown");
  return nullptr;
}

Loaded load() {
  Loaded l;
  // cuBLAS needs cuBLASLt: load it first, globally, so cuBLAS finds it loaded whatever the path.
  void* lt = open_library(cublaslt_soname, l.error);
  void* blas = lt ? open_library(cublas_soname, l.error) : nullptr;
  if (blas == nullptr) return l;
  CublasApi& a = l.api;
  bind(blas, "cublasCreate_v2", a.create, l.error);
  bind(blas, "cublasDestroy_v2", a.destroy, l.error);
  bind(blas, "cublasSetStream_v2", a.set_stream, l.error);
  bind(blas, "cublasGemmEx", a.gemm_ex, l.error);
  bind(blas, "cublasGemmStridedBatchedEx", a.gemm_strided_batched_ex, l.error);
  bind(blas, "cublasGetStatusString", a.status_string, l.error);
  bind(lt, "cublasLtCreate", a.lt_create, l.error);
  bind(lt, "cublasLtDestroy", a.lt_destroy, l.error);
  bind(lt, "cublasLtMatmul", a.lt_matmul, l.error);
  bind(lt, "cublasLtMatmulAlgoGetHeuristic", a.lt_algo_get_heuristic, l.error);
  bind(lt, "cublasLtMatmulDescCreate", a.lt_desc_create, l.error);
  bind(lt, "cublasLtMatmulDescDestroy", a.lt_desc_destroy, l.error);
  bind(lt, "cublasLtMatmulPreferenceCreate", a.lt_preference_create, l.error);
  bind(lt, "cublasLtMatmulPreferenceDestroy", a.lt_preference_destroy, l.error);
  bind(lt, "cublasLtMatmulPreferenceSetAttribute", a.lt_preference_set_attribute, l.error);
  bind(lt, "cublasLtMatrixLayoutCreate", a.lt_layout_create, l.error);
  bind(lt, "cublasLtMatrixLayoutDestroy", a.lt_layout_destroy, l.error);
  if (!l.error.empty()) l.error = "cuBLAS: " + l.error;
  return l;
}

const Loaded& loaded() {
  static const Loaded once = load();
  return once;
}

}  // namespace

Expected<const CublasApi*> cublas_api() {
  const Loaded& l = loaded();
  if (!l.error.empty()) return Error{l.error};
  return &l.api;
}

const CublasApi& cublas() {
  const Loaded& l = loaded();
  TROUPE_CHECK(l.error.empty(), "cuBLAS used before it loaded: " + l.error);
  return l.api;
}

}  // namespace troupe::compute
