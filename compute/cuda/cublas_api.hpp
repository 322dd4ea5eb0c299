#pragma once
// cuBLAS and cuBLASLt, loaded with dlopen the first time a CUDA backend or the GEMM peak needs
// them, never at program start. Why: libcublasLt carries about 94 KiB of static TLS, and a
// library linked at start puts its static TLS in every thread's stack; civetweb (under the
// Prometheus exposer) starts its threads with a fixed ~100 KiB stack, so with cuBLAS linked
// those threads could not be created and no /metrics endpoint came up — on every machine, GPU or
// not. A library loaded by dlopen keeps its TLS out of other threads' stacks.

#include <cublasLt.h>
#include <cublas_v2.h>

#include "compute/expected.hpp"

namespace troupe::compute {

struct CublasApi {
  decltype(&::cublasCreate_v2) create;
  decltype(&::cublasDestroy_v2) destroy;
  decltype(&::cublasSetStream_v2) set_stream;
  // The exported cublasGemmEx (C++ also sees an inline overload taking a cudaDataType compute type).
  cublasStatus_t (*gemm_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                            const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                            cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
  // Likewise the exported cublasGemmStridedBatchedEx.
  cublasStatus_t (*gemm_strided_batched_ex)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                            const void*, const void*, cudaDataType, int, long long, const void*,
                                            cudaDataType, int, long long, const void*, void*, cudaDataType, int,
                                            long long, int, cublasComputeType_t, cublasGemmAlgo_t);
  decltype(&::cublasGetStatusString) status_string;
  decltype(&::cublasLtCreate) lt_create;
  decltype(&::cublasLtDestroy) lt_destroy;
  decltype(&::cublasLtMatmul) lt_matmul;
  decltype(&::cublasLtMatmulAlgoGetHeuristic) lt_algo_get_heuristic;
  decltype(&::cublasLtMatmulDescCreate) lt_desc_create;
  decltype(&::cublasLtMatmulDescDestroy) lt_desc_destroy;
  decltype(&::cublasLtMatmulPreferenceCreate) lt_preference_create;
  decltype(&::cublasLtMatmulPreferenceDestroy) lt_preference_destroy;
  decltype(&::cublasLtMatmulPreferenceSetAttribute) lt_preference_set_attribute;
  decltype(&::cublasLtMatrixLayoutCreate) lt_layout_create;
  decltype(&::cublasLtMatrixLayoutDestroy) lt_layout_destroy;
};

// The loaded libraries' entry points (loaded once, then shared), or an Error naming the library
// or symbol that could not be found.
Expected<const CublasApi*> cublas_api();

// The loaded API; only after cublas_api() succeeded (a CudaBackend exists), else an internal error.
const CublasApi& cublas();

}  // namespace troupe::compute
