#pragma once
// What context attention needs from the ranks of its group: a ring shift and an all-to-all, on
// bytes. The comm engine carries them between processes; LocalContextGroup (local_exchange.hpp)
// carries them between threads of one process, for tests and benchmarks.
//
// Ring: begin_shift posts `send` to rank + 1 and a receive of recv.size() bytes from rank - 1
// (mod C); finish_shift waits for both. Between the two the caller computes on what it holds, so
// the transfer hides behind the compute. One shift is in flight at a time; `send` and `recv` stay
// untouched until finish_shift returns. Every rank of the group shifts the same sizes in the same
// order.
//
// All-to-all: send holds C equal blocks, block j for rank j; recv gets block i from rank i.

#include <cstddef>
#include <span>

#include "compute/expected.hpp"

namespace troupe::compute::context {

class ContextExchange {
 public:
  virtual ~ContextExchange() = default;
  virtual int rank() const = 0;
  virtual int shards() const = 0;
  virtual Status begin_shift(std::span<const std::byte> send, std::span<std::byte> recv) = 0;
  virtual Status finish_shift() = 0;
  virtual Status all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) = 0;
};

template <typename Real>
std::span<const std::byte> bytes_of(const Real* data, std::size_t count) {
  return std::as_bytes(std::span<const Real>(data, count));
}
template <typename Real>
std::span<std::byte> writable_bytes_of(Real* data, std::size_t count) {
  return std::as_writable_bytes(std::span<Real>(data, count));
}

}  // namespace troupe::compute::context
