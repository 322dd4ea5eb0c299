#include "comm/bf16_wire.hpp"

#include "compute/cuda/bf16.hpp"

namespace troupe::comm {

void encode_bf16(const float* from, std::uint16_t* to, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) to[i] = compute::float_to_bf16_bits(from[i]);
}

void decode_bf16(const std::uint16_t* from, float* to, std::size_t count) {
  for (std::size_t i = 0; i < count; ++i) to[i] = compute::bf16_bits_to_float(from[i]);
}

}  // namespace troupe::comm
