#pragma once
// Scratch memory for partial sums, kept between the operations of a communicator: a ring
// all-reduce of a few MiB would otherwise spend a noticeable part of its time faulting in (or
// zeroing) fresh pages for its receive slots. Progress thread only. Every block counts in the
// memory ledger as comm_buffers while it exists, in use or kept.

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

#include "compute/memory_ledger.hpp"

namespace troupe::comm {

class ScratchPool : public std::enable_shared_from_this<ScratchPool> {
 public:
  // At least `bytes` of uninitialised memory, back in the pool when the last copy goes.
  std::shared_ptr<std::byte> take(std::size_t bytes);

 private:
  struct Release {
    std::size_t bytes;
    void operator()(std::byte* p) const {
      delete[] p;
      compute::memory_ledger().remove(compute::MemoryKind::comm_buffers, bytes);
    }
  };
  using Block = std::unique_ptr<std::byte[], Release>;
  void give_back(Block block);

  static constexpr std::size_t kept_blocks = 4;
  std::vector<std::pair<std::size_t, Block>> free_;
};

}  // namespace troupe::comm
