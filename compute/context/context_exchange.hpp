#pragma once
// What context attention and expert parallelism need from the ranks of their group: a ring shift
// and an all-to-all, on bytes. The comm engine carries them between processes; LocalContextGroup
// (local_exchange.hpp) carries them between threads of one process, for tests and benchmarks.
//
// Ring: begin_shift posts `send` to rank + 1 and a receive of recv.size() bytes from rank - 1
// (mod C); finish_shift waits for both. Between the two the caller computes on what it holds, so
// the transfer hides behind the compute. One shift is in flight at a time; `send` and `recv` stay
// untouched until finish_shift returns. Every rank of the group shifts the same sizes in the same
// order.
//
// All-to-all: send holds C blocks back to back, block j (send_bytes[j] long) for rank j; recv gets
// block i (recv_bytes[i] long, what rank i sends this one) from rank i, back to back. Between
// processes an empty block travels as no message. begin_all_to_all posts it and finish_all_to_all
// waits for it, so the caller may compute between the two (an MoE block's shared expert while its
// tokens travel); one all-to-all is in flight at a time (beside a shift), its buffers untouched
// until finish_all_to_all returns. all_to_all_uneven is the two at once, all_to_all the case of C
// equal blocks (context attention's);
// exchange_counts then the uneven call is the case where the receivers learn their sizes first
// (expert parallelism's tokens, compute/moe/expert_exchange.hpp).

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::compute::context {

class ContextExchange {
 public:
  virtual ~ContextExchange() = default;
  virtual int rank() const = 0;
  virtual int shards() const = 0;
  virtual Status begin_shift(std::span<const std::byte> send, std::span<std::byte> recv) = 0;
  virtual Status finish_shift() = 0;
  virtual Status begin_all_to_all(std::span<const std::byte> send, std::span<const std::size_t> send_bytes,
                                  std::span<std::byte> recv, std::span<const std::size_t> recv_bytes) = 0;
  virtual Status finish_all_to_all() = 0;

  Status all_to_all_uneven(std::span<const std::byte> send, std::span<const std::size_t> send_bytes,
                           std::span<std::byte> recv, std::span<const std::size_t> recv_bytes);
  // Equal blocks: send.size() / C bytes each way with every rank.
  Status all_to_all(std::span<const std::byte> send, std::span<std::byte> recv);
};

// Counts first: `send` holds C equal runs of n counts, run j for rank j; returns the C runs the
// ranks send this one, run i from rank i (one equal all-to-all).
Expected<std::vector<std::int64_t>> exchange_counts(ContextExchange& exchange, std::span<const std::int64_t> send);

template <typename Real>
std::span<const std::byte> bytes_of(const Real* data, std::size_t count) {
  return std::as_bytes(std::span<const Real>(data, count));
}
template <typename Real>
std::span<std::byte> writable_bytes_of(Real* data, std::size_t count) {
  return std::as_writable_bytes(std::span<Real>(data, count));
}

}  // namespace troupe::compute::context
