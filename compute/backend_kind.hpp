#pragma once
// Which compute backend a job runs on (train.backend), decided once in the config and carried as
// this enum: code asks whether the state lives on a device, never how the backend is spelt.
//   cpu:        OpenBLAS and own kernels, everywhere.
//   cuda:       cuBLAS in fp32 and own kernels (docs/gpu.md).
//   cuda_bf16:  cuBLAS with bf16 GEMM operands, fp32 everything else.

#include <cstdint>
#include <string_view>

namespace troupe::compute {

enum class BackendKind : std::uint8_t { cpu, cuda, cuda_bf16 };

// Every kind, in the order train.backend lists them: the config parser reads a name with these.
inline constexpr BackendKind backend_kinds[] = {BackendKind::cpu, BackendKind::cuda, BackendKind::cuda_bf16};

// "cpu", "cuda", "cuda-bf16": train.backend's spelling, and Backend::name() of what it makes.
constexpr std::string_view backend_name(BackendKind kind) {
  switch (kind) {
    case BackendKind::cpu: return "cpu";
    case BackendKind::cuda: return "cuda";
    case BackendKind::cuda_bf16: return "cuda-bf16";
  }
  return "unknown backend";
}

// The parameters, gradients and optimizer state live in device memory, not the process's.
constexpr bool on_device(BackendKind kind) { return kind != BackendKind::cpu; }

}  // namespace troupe::compute
