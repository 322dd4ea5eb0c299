#include "comm/scratch_pool.hpp"

#include <algorithm>

namespace troupe::comm {

std::shared_ptr<std::byte> ScratchPool::take(std::size_t bytes) {
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->first >= bytes && (best == free_.end() || it->first < best->first)) best = it;
  }
  std::size_t size = bytes;
  std::unique_ptr<std::byte[]> block;
  if (best != free_.end()) {
    size = best->first;
    block = std::move(best->second);
    free_.erase(best);
  } else {
    block.reset(new std::byte[std::max<std::size_t>(bytes, 1)]);
  }
  std::weak_ptr<ScratchPool> pool = weak_from_this();
  return std::shared_ptr<std::byte>(block.release(), [pool, size](std::byte* p) {
    if (auto owner = pool.lock()) {
      owner->give_back(size, p);
    } else {
      delete[] p;
    }
  });
}

void ScratchPool::give_back(std::size_t bytes, std::byte* block) {
  free_.emplace_back(bytes, std::unique_ptr<std::byte[]>(block));
  if (free_.size() > kept_blocks) {
    // Keep the largest: they serve every smaller request too.
    std::sort(free_.begin(), free_.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    free_.resize(kept_blocks);
  }
}

}  // namespace troupe::comm
