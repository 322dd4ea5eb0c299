#pragma once
// Which compute backend a job runs on (train.backend), decided once in the config and carried as
// this enum: code asks whether the state lives on a device, never how the backend is spelt. The
// precision of the products is a policy of its own (precision.hpp), the same on every backend.
//   cpu:        OpenBLAS and own kernels, everywhere.
//   cuda:       cuBLAS and own kernels (docs/gpu.md).
//   sim:        no arithmetic: each op takes the time its FLOPs and bytes would on the modelled
//               device (compute/sim/, docs/scale.md); the runtime around it is the real one.

#include <cstdint>
#include <string_view>

namespace troupe::compute {

enum class BackendKind : std::uint8_t { cpu, cuda, sim };

// Every kind, in the order train.backend lists them: the config parser reads a name with these.
inline constexpr BackendKind backend_kinds[] = {BackendKind::cpu, BackendKind::cuda, BackendKind::sim};

// "cpu", "cuda", "sim": train.backend's spelling.
constexpr std::string_view backend_name(BackendKind kind) {
  switch (kind) {
    case BackendKind::cpu: return "cpu";
    case BackendKind::cuda: return "cuda";
    case BackendKind::sim: return "sim";
  }
  return "unknown backend";
}

// The parameters, gradients and optimizer state live in device memory, not the process's. A sim
// rank holds its state in the process, as a cpu rank does, and recovers as one.
constexpr bool on_device(BackendKind kind) { return kind == BackendKind::cuda; }

}  // namespace troupe::compute
