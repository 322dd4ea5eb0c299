#pragma once
// A context group's ring shifts and all-to-alls (compute/context/context_exchange.hpp) as a worker
// makes them: point-to-point messages posted to the comm engine, whose completions come back to
// the worker's mailbox (mailbox_comm.hpp), so a stop or recovery order still reaches a rank that
// waits for its ring block. The group is comm::context_group's (the context shards of one data
// replica at one stage and tensor shard), ring order its ranks' order. Every message carries
// comm::context_group_id and the operation's sequence number, which every rank of the group counts
// alike because all make the same calls in the same order (the tag's source rank tells an
// all-to-all's senders apart). docs/context-parallel.md describes the messages.

#include <cstdint>
#include <optional>
#include <utility>

#include "actors/worker/mailbox_comm.hpp"
#include "comm/engine.hpp"
#include "comm/group.hpp"
#include "compute/context/context_exchange.hpp"

namespace troupe::actors {

class MailboxContextExchange final : public compute::context::ContextExchange {
 public:
  MailboxContextExchange(MailboxComm& mailbox, comm::Engine& engine, comm::Group group);

  int rank() const override { return position_; }
  int shards() const override { return group_.size(); }
  Status begin_shift(std::span<const std::byte> send, std::span<std::byte> recv) override;
  Status finish_shift() override;
  Status all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) override;

 private:
  comm::MessageKey next_key(std::uint16_t index = 0);
  int peer(int position) const { return group_.ranks[static_cast<std::size_t>(position % shards())]; }

  MailboxComm& mailbox_;
  comm::Engine& engine_;
  comm::Group group_;
  int position_;
  std::uint16_t sequence_ = 0;
  std::optional<std::pair<MailboxComm::Operation, MailboxComm::Operation>> shift_;  // send, receive
};

}  // namespace troupe::actors
