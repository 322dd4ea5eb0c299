#include "compute/cuda/gemm_peak.hpp"

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <string>

#include "compute/cuda/cublas_api.hpp"
#include "compute/cuda/device.hpp"

namespace troupe::compute {
namespace {

// Frees what the measurement allocated on every path out.
struct Resources {
  cublasLtHandle_t lt = nullptr;
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t layout = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  void* a = nullptr;
  void* b = nullptr;
  void* c = nullptr;
  void* workspace = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Resources() {
    if (stop) cudaEventDestroy(stop);
    if (start) cudaEventDestroy(start);
    for (void* p : {a, b, c, workspace})
      if (p) cudaFree(p);
    if (preference) cublas().lt_preference_destroy(preference);
    if (layout) cublas().lt_layout_destroy(layout);
    if (op) cublas().lt_desc_destroy(op);
    if (lt) cublas().lt_destroy(lt);
  }
};

}  // namespace

Expected<double> measure_bf16_gemm_peak(int n, int iterations) {
  auto device = cuda_device();
  if (!device) return device.error();
  const auto fail = [](const std::string& what) { return Error{"bf16 GEMM peak: " + what}; };
  auto api = cublas_api();
  if (!api) return fail(api.error().message);
  const CublasApi& blas = **api;
  Resources r;
  const std::size_t bytes = static_cast<std::size_t>(n) * n * 2;
  constexpr std::size_t kWorkspace = 32 << 20;
  if (cudaMalloc(&r.a, bytes) != cudaSuccess || cudaMalloc(&r.b, bytes) != cudaSuccess ||
      cudaMalloc(&r.c, bytes) != cudaSuccess || cudaMalloc(&r.workspace, kWorkspace) != cudaSuccess)
    return fail("cannot allocate three " + std::to_string(n) + "² bf16 matrices");
  cudaMemset(r.a, 0x3c, bytes);  // 0x3c3c ≈ 0.0115 in bf16
  cudaMemset(r.b, 0x3c, bytes);
  if (blas.lt_create(&r.lt) != CUBLAS_STATUS_SUCCESS ||
      blas.lt_desc_create(&r.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
      blas.lt_layout_create(&r.layout, CUDA_R_16BF, n, n, n) != CUBLAS_STATUS_SUCCESS ||
      blas.lt_preference_create(&r.preference) != CUBLAS_STATUS_SUCCESS)
    return fail("cuBLASLt setup failed");
  blas.lt_preference_set_attribute(r.preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace,
                                       sizeof kWorkspace);
  cublasLtMatmulHeuristicResult_t heuristic{};
  int found = 0;
  if (blas.lt_algo_get_heuristic(r.lt, r.op, r.layout, r.layout, r.layout, r.layout, r.preference, 1, &heuristic,
                                     &found) != CUBLAS_STATUS_SUCCESS ||
      found == 0)
    return fail("cuBLASLt has no algorithm for a bf16 GEMM of " + std::to_string(n));
  const float alpha = 1.0f, beta = 0.0f;
  auto run = [&] {
    return blas.lt_matmul(r.lt, r.op, &alpha, r.a, r.layout, r.b, r.layout, &beta, r.c, r.layout, r.c, r.layout,
                          &heuristic.algo, r.workspace, kWorkspace, nullptr);
  };
  if (run() != CUBLAS_STATUS_SUCCESS) return fail("cublasLtMatmul failed");
  cudaEventCreate(&r.start);
  cudaEventCreate(&r.stop);
  double best = 0;
  for (int i = 0; i < iterations; ++i) {
    cudaEventRecord(r.start);
    run();
    cudaEventRecord(r.stop);
    if (cudaEventSynchronize(r.stop) != cudaSuccess) return fail("the GEMM did not complete");
    float ms = 0;
    cudaEventElapsedTime(&ms, r.start, r.stop);
    best = std::max(best, 2.0 * n * static_cast<double>(n) * n / (ms * 1e-3));
  }
  return best;
}

}  // namespace troupe::compute
