#pragma once
// Scratch memory for partial sums, kept between the operations of a communicator: a ring
// all-reduce of a few MiB would otherwise spend a noticeable part of its time faulting in (or
// zeroing) fresh pages for its receive slots. Progress thread only.

#include <cstddef>
#include <memory>
#include <utility>
#include <vector>

namespace troupe::comm {

class ScratchPool : public std::enable_shared_from_this<ScratchPool> {
 public:
  // At least `bytes` of uninitialised memory, back in the pool when the last copy goes.
  std::shared_ptr<std::byte> take(std::size_t bytes);

 private:
  void give_back(std::size_t bytes, std::byte* block);

  static constexpr std::size_t kept_blocks = 4;
  std::vector<std::pair<std::size_t, std::unique_ptr<std::byte[]>>> free_;
};

}  // namespace troupe::comm
