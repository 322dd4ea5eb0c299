#include "checkpoint/file_hash.hpp"

#include <cstdio>
#include <new>

namespace troupe::checkpoint {
namespace {

std::string to_hex(XXH64_hash_t hash) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(hash));
  return text;
}

}  // namespace

StreamingHash::StreamingHash() : state_(XXH3_createState()) {
  if (!state_) throw std::bad_alloc();
  XXH3_64bits_reset(state_);
}

StreamingHash::~StreamingHash() { XXH3_freeState(state_); }

void StreamingHash::update(const void* data, std::size_t size) { XXH3_64bits_update(state_, data, size); }

std::string StreamingHash::hex() const { return to_hex(XXH3_64bits_digest(state_)); }

std::string hash_hex(std::span<const std::byte> bytes) { return to_hex(XXH3_64bits(bytes.data(), bytes.size())); }

}  // namespace troupe::checkpoint
