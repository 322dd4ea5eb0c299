#include "compute/cuda/device.hpp"

#include <cuda_runtime_api.h>

namespace troupe::compute {

Expected<std::string> cuda_device() {
  int count = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess || count == 0) {
    const std::string reason = status != cudaSuccess ? cudaGetErrorString(status) : "the driver lists none";
    cudaGetLastError();  // the runtime keeps the failure sticky for the next call otherwise
    return Error{"no CUDA device: " + reason};
  }
  int device = 0;
  cudaDeviceProp prop{};
  if (const cudaError_t status = cudaGetDevice(&device); status != cudaSuccess)
    return Error{std::string("no CUDA device: cudaGetDevice: ") + cudaGetErrorString(status)};
  if (const cudaError_t status = cudaGetDeviceProperties(&prop, device); status != cudaSuccess)
    return Error{std::string("no CUDA device: cudaGetDeviceProperties: ") + cudaGetErrorString(status)};
  const std::string sm = "sm_" + std::to_string(prop.major) + std::to_string(prop.minor);
  if (prop.major < 8)
    return Error{"CUDA device " + std::to_string(device) + " (" + prop.name + ") is " + sm +
                 "; the CUDA backend is built for sm_80 and newer (bf16 tensor cores)"};
  return std::string(prop.name) + ", " + sm;
}

Status use_cuda_device(int local_rank) {
  int count = 0;
  if (const cudaError_t status = cudaGetDeviceCount(&count); status != cudaSuccess) {
    cudaGetLastError();
    return Error{std::string("no CUDA device: ") + cudaGetErrorString(status)};
  }
  if (local_rank < 0 || local_rank >= count)
    return Error{"local rank " + std::to_string(local_rank) + " has no GPU of its own: this host has " +
                 std::to_string(count) + " CUDA device(s); start at most " + std::to_string(count) +
                 " worker(s) on it"};
  if (const cudaError_t status = cudaSetDevice(local_rank); status != cudaSuccess)
    return Error{"CUDA device " + std::to_string(local_rank) + ": " + cudaGetErrorString(status)};
  return Status::success();
}

}  // namespace troupe::compute
