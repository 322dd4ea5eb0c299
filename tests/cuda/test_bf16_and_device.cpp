// Host-side bf16 rounding (compute/cuda/bf16.hpp), and what asking for a CUDA backend gives on
// this machine: a backend where there is a device, else one clear "no CUDA device" error.

#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "compute/backend.hpp"
#include "compute/cuda/bf16.hpp"
#include "compute/cuda/cublas_api.hpp"
#include "compute/cuda/device.hpp"

namespace troupe::compute {

TEST_CASE("bf16 rounds to nearest, ties to even, and keeps inf and nan", "[cuda]") {
  REQUIRE(float_to_bf16_bits(1.0f) == 0x3f80);
  REQUIRE(float_to_bf16_bits(-2.0f) == 0xc000);
  REQUIRE(float_to_bf16_bits(0.0f) == 0x0000);
  REQUIRE(float_to_bf16_bits(-0.0f) == 0x8000);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa (1).
  REQUIRE(float_to_bf16_bits(1.00390625f) == 0x3f80);
  // 1 + 3·2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: even is 1 + 2^-6.
  REQUIRE(float_to_bf16_bits(1.01171875f) == 0x3f82);
  REQUIRE(float_to_bf16_bits(1.0f + 1.5f / 256) == 0x3f81);  // above the tie: up
  REQUIRE(float_to_bf16_bits(std::numeric_limits<float>::infinity()) == 0x7f80);
  REQUIRE(float_to_bf16_bits(std::numeric_limits<float>::max()) == 0x7f80);  // rounds past the largest bf16
  REQUIRE(std::isnan(round_to_bf16(std::numeric_limits<float>::quiet_NaN())));
  REQUIRE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(std::numeric_limits<float>::signaling_NaN()))));
  REQUIRE(bf16_bits_to_float(0x4049) == 3.140625f);
  for (float x : {3.14159f, -1e-3f, 65504.0f, 1e30f}) {
    const float r = round_to_bf16(x);
    REQUIRE(std::abs(r - x) <= std::abs(x) * (1.0f / 256));  // 8 significant bits
    REQUIRE(round_to_bf16(r) == r);                           // idempotent
  }
}

TEST_CASE("a cuda backend is made where there is a device, else a one-line no-device error", "[cuda]") {
  const auto device = cuda_device();
  for (const Precision precision : precisions) {
    const std::string_view name = precision_name(precision);
    auto backend = make_backend(BackendKind::cuda, precision, 0);
    INFO(name);
    if (device) {
      REQUIRE(backend.ok());
      REQUIRE((*backend)->device() == Device::cuda);
      REQUIRE((*backend)->name() == (precision == Precision::fp32 ? "cuda" : "cuda, bf16 products"));
    } else {
      REQUIRE_FALSE(backend.ok());
      REQUIRE(backend.error().message.rfind("no CUDA device: ", 0) == 0);
      REQUIRE(backend.error().message.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("cuBLAS loads on demand with every entry point the backend calls, device or not", "[cuda]") {
  auto api = cublas_api();
  INFO((api ? std::string() : api.error().message));
  REQUIRE(api.ok());
  const CublasApi& a = **api;
  for (const void* entry :
       {reinterpret_cast<const void*>(a.create), reinterpret_cast<const void*>(a.destroy),
        reinterpret_cast<const void*>(a.set_stream), reinterpret_cast<const void*>(a.gemm_ex),
        reinterpret_cast<const void*>(a.status_string), reinterpret_cast<const void*>(a.lt_create),
        reinterpret_cast<const void*>(a.lt_destroy), reinterpret_cast<const void*>(a.lt_matmul),
        reinterpret_cast<const void*>(a.lt_algo_get_heuristic), reinterpret_cast<const void*>(a.lt_desc_create),
        reinterpret_cast<const void*>(a.lt_desc_destroy), reinterpret_cast<const void*>(a.lt_preference_create),
        reinterpret_cast<const void*>(a.lt_preference_destroy),
        reinterpret_cast<const void*>(a.lt_preference_set_attribute),
        reinterpret_cast<const void*>(a.lt_layout_create), reinterpret_cast<const void*>(a.lt_layout_destroy)})
    CHECK(entry != nullptr);
  CHECK(std::string(a.status_string(CUBLAS_STATUS_NOT_INITIALIZED)) == "the library was not initialized");
}

}  // namespace troupe::compute
