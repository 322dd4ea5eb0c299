#pragma once
// The checksum of checkpoint files: XXH3 64-bit over every byte of the file, written as 16
// lowercase hex digits. XXH3 runs at memory speed, so hashing while writing costs nothing next
// to the disk, and a loader can verify a whole checkpoint before trusting it.

#include <xxhash.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace troupe::checkpoint {

// Named in the manifest so a later build can change the algorithm without misreading old files.
inline constexpr const char* hash_algorithm = "xxh3_64";

// Hashes bytes as they stream past (while a file is written).
class StreamingHash {
 public:
  StreamingHash();
  ~StreamingHash();
  StreamingHash(const StreamingHash&) = delete;
  StreamingHash& operator=(const StreamingHash&) = delete;

  void update(const void* data, std::size_t size);
  std::string hex() const;

 private:
  XXH3_state_t* state_;
};

std::string hash_hex(std::span<const std::byte> bytes);

}  // namespace troupe::checkpoint
