#include "compute/context/context_exchange.hpp"

#include <string>

namespace troupe::compute::context {

Status ContextExchange::all_to_all_uneven(std::span<const std::byte> send, std::span<const std::size_t> send_bytes,
                                          std::span<std::byte> recv, std::span<const std::size_t> recv_bytes) {
  if (Status begun = begin_all_to_all(send, send_bytes, recv, recv_bytes); !begun) return begun;
  return finish_all_to_all();
}

Status ContextExchange::all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) {
  const std::size_t ranks = static_cast<std::size_t>(shards()), block = send.size() / ranks;
  if (send.size() != recv.size() || block * ranks != send.size()) {
    return Error{"context exchange: an all-to-all of " + std::to_string(send.size()) + " bytes into " +
                 std::to_string(recv.size()) + " over " + std::to_string(ranks) + " ranks needs equal blocks"};
  }
  const std::vector<std::size_t> sizes(ranks, block);
  return all_to_all_uneven(send, sizes, recv, sizes);
}

Expected<std::vector<std::int64_t>> exchange_counts(ContextExchange& exchange, std::span<const std::int64_t> send) {
  std::vector<std::int64_t> got(send.size());
  if (Status s = exchange.all_to_all(std::as_bytes(send), std::as_writable_bytes(std::span(got))); !s) return s.error();
  return got;
}

}  // namespace troupe::compute::context
