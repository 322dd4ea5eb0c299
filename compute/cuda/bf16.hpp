#pragma once
// bfloat16 on the host: the upper half of an IEEE float, rounded to nearest even (as
// __float2bfloat16_rn on the device, which a [gpu] test checks bit for bit). Used to build
// bf16 references on the CPU and to read bf16 device buffers back.

#include <bit>
#include <cstdint>

namespace troupe::compute {

constexpr std::uint16_t float_to_bf16_bits(float x) {
  const std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);  // NaN stays quiet NaN
  const std::uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);  // ties to the even upper half
  return static_cast<std::uint16_t>((u + rounding) >> 16);
}

constexpr float bf16_bits_to_float(std::uint16_t bits) { return std::bit_cast<float>(std::uint32_t{bits} << 16); }

constexpr float round_to_bf16(float x) { return bf16_bits_to_float(float_to_bf16_bits(x)); }

}  // namespace troupe::compute
