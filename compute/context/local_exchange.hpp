#pragma once
// A context group whose C ranks are threads of one process: each rank's ContextExchange hands
// bytes to the others through mailboxes under one mutex. The ring's and the all-to-all's transfers
// are copies made when they begin (so they overlap nothing here); what it pins is the protocol: who sends what to whom,
// in which order, with which sizes, the same as the comm engine carries between processes.

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <vector>

#include "compute/context/context_exchange.hpp"

namespace troupe::compute::context {

class LocalContextGroup {
 public:
  explicit LocalContextGroup(int shards);
  ~LocalContextGroup();
  ContextExchange& rank(int r);

 private:
  class Rank;
  struct Mailbox {
    std::deque<std::vector<std::byte>> shifts;               // from the rank before, in order
    std::vector<std::deque<std::vector<std::byte>>> blocks;  // all-to-all blocks, by sender
  };
  void post_shift(int to, std::span<const std::byte> bytes);
  Status take_shift(int at, std::span<std::byte> into);
  Status post_blocks(int r, std::span<const std::byte> send, std::span<const std::size_t> send_bytes,
                     std::span<const std::byte> recv, std::span<const std::size_t> recv_bytes);
  Status take_blocks(int r, std::span<std::byte> recv, std::span<const std::size_t> recv_bytes);

  int shards_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Mailbox> boxes_;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

}  // namespace troupe::compute::context
