#include "comm/block_arena.hpp"

#include <utility>

#include "compute/expected.hpp"

namespace troupe::comm {

BlockArena::BlockArena(std::byte* base, std::size_t block_bytes, std::size_t blocks)
    : base_(base), block_bytes_(block_bytes) {
  for (std::size_t b = blocks; b-- > 0;) free_.push_back(b * block_bytes);
}

void BlockArena::take(std::function<void(MappedBlock)> ready) {
  if (free_.empty()) {
    waiting_.push_back(std::move(ready));
    return;
  }
  const std::uint64_t offset = free_.back();
  free_.pop_back();
  ready(MappedBlock{offset, base_ + offset});
}

void BlockArena::give_back(std::uint64_t offset) {
  TROUPE_CHECK(offset % block_bytes_ == 0, "a block given back at an offset no block starts at");
  if (waiting_.empty()) {
    free_.push_back(offset);
    return;
  }
  auto ready = std::move(waiting_.front());
  waiting_.pop_front();
  ready(MappedBlock{offset, base_ + offset});
}

}  // namespace troupe::comm
