#pragma once
// A context group's ring shifts and all-to-alls (compute/context/context_exchange.hpp) as a worker
// makes them: point-to-point messages posted to the comm engine, whose completions come back to
// the worker's mailbox (mailbox_comm.hpp), so a stop or recovery order still reaches a rank that
// waits for its ring block. The group is comm::context_group's (the context shards of one data
// replica at one stage and tensor shard), ring order its ranks' order. Every message carries comm::context_group_id and
// the operation's sequence number, which every rank of the group counts alike because all make the same calls in the
// same order (the tag's source rank tells an all-to-all's senders apart). An in-place recovery renews the group
// (renew): under the recovery's epoch id and from sequence 0, as a replacement rank starts it, so that no late message
// of the abandoned step matches a new one. A transfer that fails (a lost peer) throws CommFailed from the wait, as
// every wait of the step does, so the worker waits for the job's recovery or rescue order instead of failing. Each
// shift and all-to-all is counted in the engine's traffic (comm::ContextTraffic: the bytes this rank sent, the seconds
// it spent in the calls), which /metrics exports as troupe_comm_cp_*, and, given a recorder, traced as a "transfer"
// event from its post to its end on the rank's track (process: its data replica; thread: its context shard). An
// expert group's exchange (comm::ExchangeGroup::expert: its MoE blocks' counts, dispatches and combines) counts its
// all-to-alls apart instead, exported as troupe_moe_all_to_all_*.
// The exchange sends from and receives into buffers of its own, which its posted transfers hold
// (mailbox_comm.hpp), and hands the received bytes over at the finish: a step given up part-way —
// an order taken in a wait, the caller's buffers freed as its stack unwinds — leaves no transfer
// reading or writing the caller's memory; a late message lands in the exchange's buffer. The
// buffers are kept from one operation to the next (compute::ReusedBuffer) and reused once no
// transfer holds them; a renewal drops them, so a buffer an abandoned transfer may still write is
// never handed out again.
// docs/context-parallel.md describes the messages.

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "actors/worker/mailbox_comm.hpp"
#include "comm/engine.hpp"
#include "comm/grid.hpp"
#include "comm/group.hpp"
#include "comm/traffic.hpp"
#include "compute/context/context_exchange.hpp"
#include "compute/reused_buffer.hpp"
#include "monitor/trace.hpp"

namespace troupe::actors {

class MailboxContextExchange final : public compute::context::ContextExchange {
 public:
  MailboxContextExchange(MailboxComm& mailbox, comm::Engine& engine, comm::Group group,
                         comm::ExchangeGroup counted_as = comm::ExchangeGroup::context);

  int rank() const override { return position_; }
  int shards() const override { return group_.size(); }
  Status begin_shift(std::span<const std::byte> send, std::span<std::byte> recv) override;
  Status finish_shift() override;
  Status begin_all_to_all(std::span<const std::byte> send, std::span<const std::size_t> send_bytes,
                          std::span<std::byte> recv, std::span<const std::size_t> recv_bytes) override;
  Status finish_all_to_all() override;
  // Forgets the operations of a step given up part-way (their transfers the mailbox abandoned) and
  // goes on under `epoch`'s group id (comm::epoch_group_id) from sequence 0.
  void renew(int epoch);
  // Records every exchange from now on into `recorder`, which outlives this exchange.
  void record_into(monitor::TraceRecorder& recorder);

 private:
  comm::MessageKey next_key(std::uint16_t index = 0);
  int peer(int position) const { return group_.ranks[static_cast<std::size_t>(position % shards())]; }
  // The trace's process of this group: its data replica (traces are written for jobs of data
  // replicas and context shards alone, whose context groups are consecutive ranks).
  int trace_process() const { return group_.ranks.front() / shards(); }
  // A shift or all-to-all posted: its transfers, the bytes it sends off the rank, its sequence
  // number, when it was posted and the time spent in its calls so far; what it receives into (all
  // of the caller's receive, in order) and where that goes at the finish.
  struct InFlight {
    std::vector<MailboxComm::Operation> transfers;
    compute::Tensor received;
    std::span<std::byte> deliver_to;
    std::uint64_t bytes = 0;
    std::uint16_t sequence = 0;
    std::chrono::steady_clock::time_point posted;
    std::chrono::steady_clock::duration spent{};
  };
  // Waits for every transfer of `op` (the first failure thrown once all ended), hands its received
  // bytes to the caller, then counts it and traces it when recording.
  void finish(const InFlight& op, comm::ContextTraffic kind);

  MailboxComm& mailbox_;
  comm::Engine& engine_;
  comm::Group group_;
  comm::ExchangeGroup counted_as_;
  int position_;
  std::uint16_t group_id_;  // the group's id, renewed under each in-place recovery's epoch
  std::uint16_t sequence_ = 0;
  std::optional<InFlight> shift_, all_to_all_;
  compute::ReusedBuffer shift_sent_, shift_received_, all_to_all_sent_, all_to_all_received_;
  monitor::TraceRecorder* trace_ = nullptr;
};

}  // namespace troupe::actors
