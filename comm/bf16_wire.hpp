#pragma once
// Gradients as bfloat16 on the wire: f32 values rounded to nearest even (ties to even), and
// read back exactly (a bf16 value is the upper half of an f32). The ring adds bf16 chunks in
// f32 and rounds each partial sum again before it moves on (reduce_sum.hpp).

#include <cstddef>
#include <cstdint>

namespace troupe::comm {

void encode_bf16(const float* from, std::uint16_t* to, std::size_t count);
void decode_bf16(const std::uint16_t* from, float* to, std::size_t count);

}  // namespace troupe::comm
