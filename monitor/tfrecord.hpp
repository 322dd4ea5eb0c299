#pragma once
// TFRecord framing, as TensorBoard's event files use it (docs/formats/tensorboard-events.md): each
// record is its length (u64, little-endian), the masked CRC32C of those 8 bytes (u32), the data,
// and the masked CRC32C of the data (u32). CRC32C is the Castagnoli polynomial (reflected
// 0x82F63B78); the mask rotates right by 15 and adds 0xa282ead8, so a CRC of bytes that hold CRCs
// does not degenerate.

#include <cstdint>
#include <string>
#include <string_view>

namespace troupe::monitor {

std::uint32_t crc32c(std::string_view bytes);
std::uint32_t masked_crc32c(std::string_view bytes);
// One framed record holding `data`.
std::string tfrecord(std::string_view data);

}  // namespace troupe::monitor
