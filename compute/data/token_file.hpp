#pragma once
// Token files in llm.c's `.bin` format, so data prepared by their scripts (e.g.
// tinyshakespeare_train.bin) trains here unchanged. Layout (docs/formats/token-file.md):
//   header: 256 little-endian int32 — [0] magic 20240520, [1] version 1, [2] token count,
//           the rest zero;
//   body:   count little-endian uint16 tokens, nothing after them.
// llm.c's 32-bit variant (magic 20240801, version 7, uint32 tokens, for vocabularies over 65536) is
// written for other tools (troupe tokenize with such a vocabulary) and refused by the reader with a
// clear error rather than misread.
// The reader checks the file size against the count, so a truncated copy never trains quietly.

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::compute {

inline constexpr std::int32_t token_file_magic = 20240520;
inline constexpr std::int32_t token_file_version = 1;
inline constexpr std::int32_t token_file32_magic = 20240801;
inline constexpr std::int32_t token_file32_version = 7;
inline constexpr std::size_t token_file_header_ints = 256;
inline constexpr std::size_t token_file_header_bytes = token_file_header_ints * sizeof(std::int32_t);

Expected<std::vector<std::uint16_t>> load_token_file(const std::string& path);

// Writes `path.tmp`, flushes it to disk, then renames it over `path`: a reader sees the old
// file or the complete new one, never a torn write.
Status write_token_file(const std::string& path, std::span<const std::uint16_t> tokens);
// The same with 32-bit tokens: magic 20240801, version 7, 4-byte little-endian tokens.
Status write_token_file32(const std::string& path, std::span<const std::uint32_t> tokens);

}  // namespace troupe::compute
