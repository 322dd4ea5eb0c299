#pragma once
// Pseudo-gradients as int8 on the wire (train.diloco_precision int8): the values in blocks of
// int8_block_values, each block an f32 scale (its largest magnitude over 127) then its values
// rounded to the nearest multiple of the scale (ties to even), 1 + 4/256 bytes a value. A sum of
// such payloads cannot be added on the way as bf16 or f32 chunks are: every island's payload is
// gathered, and each rank decodes and adds them in island order, so every rank gets the same sum.
//
// Layout, block b of a payload of `count` values (the last block may be short):
//     bytes [b·(4 + 256), +4)      the scale, f32 in host byte order
//     bytes [b·(4 + 256) + 4, +n)  n int8 values, n = min(256, count - 256·b)

#include <cstddef>
#include <cstdint>

namespace troupe::compute {

inline constexpr std::int64_t int8_block_values = 256;

// Bytes of the payload of `count` values.
std::int64_t int8_blocks_bytes(std::int64_t count);

// Writes `count` values as a payload of int8_blocks_bytes(count) bytes at `to`. A block of zeros
// has scale 0; a block holding a non-finite value gets a non-finite scale, so it decodes to NaN
// (and the step's non-finite check stops the job) rather than to a finite wrong value.
void encode_int8_blocks(const float* from, std::int64_t count, std::byte* to);

// Decodes the payload of `count` values at `from` into `sum` (first) or adds it to `sum`.
void add_int8_blocks(const std::byte* from, std::int64_t count, float* sum, bool first);

}  // namespace troupe::compute
