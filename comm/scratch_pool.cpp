#include "comm/scratch_pool.hpp"

#include <algorithm>

namespace troupe::comm {

std::shared_ptr<std::byte> ScratchPool::take(std::size_t bytes) {
  auto best = free_.end();
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->first >= bytes && (best == free_.end() || it->first < best->first)) best = it;
  }
  Block block(nullptr, Release{bytes});
  if (best != free_.end()) {
    block = std::move(best->second);
    free_.erase(best);
  } else {
    const std::size_t size = std::max<std::size_t>(bytes, 1);
    block = Block(new std::byte[size], Release{size});
    compute::memory_ledger().add(compute::MemoryKind::comm_buffers, size);
  }
  std::weak_ptr<ScratchPool> pool = weak_from_this();
  const Release release = block.get_deleter();
  return std::shared_ptr<std::byte>(block.release(), [pool, release](std::byte* p) {
    if (auto owner = pool.lock()) {
      owner->give_back(Block(p, release));
    } else {
      release(p);
    }
  });
}

void ScratchPool::give_back(Block block) {
  const std::size_t bytes = block.get_deleter().bytes;
  free_.emplace_back(bytes, std::move(block));
  if (free_.size() > kept_blocks) {
    // Keep the largest: they serve every smaller request too.
    std::sort(free_.begin(), free_.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    free_.erase(free_.begin() + kept_blocks, free_.end());
  }
}

}  // namespace troupe::comm
