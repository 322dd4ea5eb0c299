#pragma once
// CUDA and cuBLAS calls that fail mid-run (a launch error, an illegal address, a lost device) are
// not user errors the caller can act on: they throw like any internal check, naming the call and
// the runtime's own message. A missing device is caught earlier, as an Error (device.hpp).

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <string>

#include "compute/check.hpp"
#include "compute/cuda/cublas_api.hpp"

#define TROUPE_CUDA_CHECK(call)                                                     \
  do {                                                                              \
    const cudaError_t troupe_cuda_status_ = (call);                                 \
    TROUPE_CHECK(troupe_cuda_status_ == cudaSuccess, std::string(#call) + ": " +    \
                                                         cudaGetErrorString(troupe_cuda_status_)); \
  } while (0)

#define TROUPE_CUBLAS_CHECK(call)                                                   \
  do {                                                                              \
    const cublasStatus_t troupe_cublas_status_ = (call);                            \
    TROUPE_CHECK(troupe_cublas_status_ == CUBLAS_STATUS_SUCCESS,                    \
                 std::string(#call) + ": " + ::troupe::compute::cublas().status_string(troupe_cublas_status_)); \
  } while (0)

// After a kernel launch: a bad configuration shows here, a fault in the kernel at the next sync.
#define TROUPE_CUDA_LAUNCHED() TROUPE_CUDA_CHECK(cudaGetLastError())
