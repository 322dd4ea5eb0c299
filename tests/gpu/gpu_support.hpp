#pragma once
// What the [gpu] tests share: moving tensors between the host and a CUDA backend, NaN-poisoned
// outputs (an element a kernel forgets to write stays NaN and fails the comparison), and the
// comparison itself: max |gpu - cpu| / max |cpu| over the tensor, every gpu element finite.

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/cuda/cuda_backend.hpp"
#include "compute/random.hpp"

namespace troupe::tests {

inline std::unique_ptr<compute::CudaBackend> cuda_backend(compute::Precision precision) {
  auto backend = compute::CudaBackend::create(precision);
  REQUIRE(backend.ok());
  return std::move(*backend);
}

// Host f32 tensor of normal values × scale, a pure function of `stream`.
inline compute::Tensor random_host(compute::Shape shape, std::uint64_t stream, double scale = 1.0) {
  compute::Tensor t = compute::Tensor::zeros(std::move(shape), compute::DType::f32);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data_as<float>()[i] = static_cast<float>(scale * compute::counter_normal(7, stream, static_cast<std::uint64_t>(i)));
  return t;
}

inline compute::Tensor ids_host(compute::Shape shape, int limit, std::uint64_t stream) {
  compute::Tensor t = compute::Tensor::zeros(std::move(shape), compute::DType::i32);
  for (std::int64_t i = 0; i < t.numel(); ++i)
    t.data_as<std::int32_t>()[i] =
        static_cast<std::int32_t>(compute::splitmix64(stream * 1000003 + static_cast<std::uint64_t>(i)) % limit);
  return t;
}

inline compute::Tensor to_device(compute::Backend& gpu, const compute::Tensor& host) {
  compute::Tensor d = gpu.zeros(host.shape(), host.dtype());
  gpu.copy(d, host);
  return d;
}

inline compute::Tensor to_host(compute::Backend& gpu, const compute::Tensor& device) {
  compute::Tensor h = compute::Tensor::zeros(device.shape(), device.dtype());
  gpu.copy(h, device);
  return h;
}

inline compute::Tensor poisoned(compute::Backend& gpu, compute::Shape shape) {
  compute::Tensor h = compute::Tensor::zeros(std::move(shape), compute::DType::f32);
  for (std::int64_t i = 0; i < h.numel(); ++i) h.data_as<float>()[i] = std::numeric_limits<float>::quiet_NaN();
  return to_device(gpu, h);
}

inline compute::Tensor host_copy(const compute::Tensor& t) {
  compute::Tensor c = compute::Tensor::zeros(t.shape(), t.dtype());
  std::copy_n(static_cast<const char*>(t.data()), t.nbytes(), static_cast<char*>(c.data()));
  return c;
}

// The GPU result (on the device) against the CPU reference (on the host).
inline void require_close(compute::Backend& gpu, const compute::Tensor& device, const compute::Tensor& reference,
                          double tolerance, const std::string& what) {
  const compute::Tensor got = to_host(gpu, device);
  REQUIRE(got.numel() == reference.numel());
  double max_diff = 0, max_ref = 0;
  std::int64_t not_finite = 0;
  for (std::int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.data_as<float>()[i], r = reference.data_as<float>()[i];
    if (!std::isfinite(g)) ++not_finite;
    max_diff = std::max(max_diff, std::abs(g - r));
    max_ref = std::max(max_ref, std::abs(r));
  }
  INFO(what << ": " << not_finite << " element(s) not finite (unwritten), relative error " << max_diff / max_ref);
  REQUIRE(not_finite == 0);
  REQUIRE(max_diff <= tolerance * max_ref);
}

}  // namespace troupe::tests
