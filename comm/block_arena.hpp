#pragma once
// Fixed-size blocks cut from one region of memory, handed out in turn (internal to comm/). The
// engine's region is shared memory that neighbours on this host map and read in place (see
// "Mapped blocks" in docs/comm.md); a ring stages a chunk in a block, tells the reader its
// offset, and gets the block back when the reader says it has read it. Progress thread only.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

namespace troupe::comm {

struct MappedBlock {
  std::uint64_t offset = 0;  // from the region's start: what a reader needs to find it
  std::byte* data = nullptr;
};

class BlockArena {
 public:
  BlockArena(std::byte* base, std::size_t block_bytes, std::size_t blocks);

  std::size_t block_bytes() const { return block_bytes_; }
  // Runs `ready` with a free block: at once when one is free, else when one is given back
  // (waiters are served in the order they asked).
  void take(std::function<void(MappedBlock)> ready);
  void give_back(std::uint64_t offset);

 private:
  std::byte* base_;
  std::size_t block_bytes_;
  std::vector<std::uint64_t> free_;
  std::deque<std::function<void(MappedBlock)>> waiting_;
};

}  // namespace troupe::comm
