#include "actors/worker/mailbox_context_exchange.hpp"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace troupe::actors {
namespace {

// `buffer`, holding a copy of `bytes` at `at` (the rest as it was).
void copy_into(const compute::Tensor& buffer, std::size_t at, std::span<const std::byte> bytes) {
  if (!bytes.empty()) std::memcpy(static_cast<std::byte*>(buffer.data()) + at, bytes.data(), bytes.size());
}

// Bytes [at, at + bytes) of `buffer`, sharing (and so holding) its storage.
compute::Tensor part(const compute::Tensor& buffer, std::size_t at, std::size_t bytes) {
  return buffer.slice(static_cast<std::int64_t>(at / 4), {static_cast<std::int64_t>(bytes / 4)});
}

}  // namespace

MailboxContextExchange::MailboxContextExchange(MailboxComm& mailbox, comm::Engine& engine, comm::Group group,
                                               comm::ExchangeGroup counted_as)
    : mailbox_(mailbox),
      engine_(engine),
      group_(std::move(group)),
      counted_as_(counted_as),
      position_(group_.position_of(engine.rank())),
      group_id_(group_.id) {
  TROUPE_CHECK(position_ >= 0, "a context exchange of a group without this rank");
}

comm::MessageKey MailboxContextExchange::next_key(std::uint16_t index) {
  return {comm::MessageKind::point_to_point, group_id_, sequence_, index};
}

void MailboxContextExchange::record_into(monitor::TraceRecorder& recorder) {
  trace_ = &recorder;
  const int replica = trace_process();
  recorder.name_process(replica, "replica " + std::to_string(replica));
  recorder.name_track({replica, rank()},
                      "context shard " + std::to_string(rank()) + " (rank " + std::to_string(engine_.rank()) + ")");
}

void MailboxContextExchange::finish(const InFlight& op, comm::ContextTraffic kind) {
  const auto began = std::chrono::steady_clock::now();
  Status first_failure;
  for (MailboxComm::Operation transfer : op.transfers) {
    Status s = mailbox_.wait(transfer);
    if (!s && first_failure) first_failure = s;
  }
  check_comm(first_failure);
  if (!op.deliver_to.empty()) std::memcpy(op.deliver_to.data(), op.received.data(), op.deliver_to.size());
  const auto spent = op.spent + (std::chrono::steady_clock::now() - began);
  if (counted_as_ == comm::ExchangeGroup::expert)
    engine_.traffic()->expert_finished(op.bytes, spent);
  else
    engine_.traffic()->context_finished(kind, op.bytes, spent);
  if (trace_ == nullptr) return;
  using micros = std::chrono::duration<double, std::micro>;
  trace_->add_complete({trace_process(), rank()}, comm::context_traffic_name(kind), "transfer",
                       micros(op.posted.time_since_epoch()).count(),
                       micros(std::chrono::steady_clock::now() - op.posted).count(),
                       {{"bytes", std::to_string(op.bytes)}, {"sequence", std::to_string(op.sequence)}});
}

void MailboxContextExchange::renew(int epoch) {
  shift_.reset();
  all_to_all_.reset();
  for (compute::ReusedBuffer* kept : {&shift_sent_, &shift_received_, &all_to_all_sent_, &all_to_all_received_})
    kept->drop();
  group_id_ = comm::epoch_group_id(comm::context_group_id, epoch);
  sequence_ = 0;
}

Status MailboxContextExchange::begin_shift(std::span<const std::byte> send, std::span<std::byte> recv) {
  if (shift_) return Error{"context exchange: a ring shift began while another is in flight"};
  if (send.size() % 4 != 0 || recv.size() % 4 != 0)
    return Error{"context exchange: ring blocks are whole 4-byte words"};
  const auto began = std::chrono::steady_clock::now();
  const int r = rank();
  const comm::MessageKey key = next_key();
  ++sequence_;
  InFlight op{{}, shift_received_.take(recv.size()), recv, send.size(), key.sequence, began, {}};
  const compute::Tensor sent = shift_sent_.take(send.size());
  copy_into(sent, 0, send);
  op.transfers.push_back(mailbox_.recv(engine_, peer(r + shards() - 1), key, op.received));
  op.transfers.push_back(mailbox_.send(engine_, peer(r + 1), key, sent));
  op.spent = std::chrono::steady_clock::now() - began;
  shift_ = std::move(op);
  return Status::success();
}

Status MailboxContextExchange::finish_shift() {
  if (!shift_) return Error{"context exchange: finish_shift without a shift in flight"};
  const InFlight op = std::move(*shift_);
  shift_.reset();
  finish(op, comm::ContextTraffic::ring_shift);
  return Status::success();
}

Status MailboxContextExchange::begin_all_to_all(std::span<const std::byte> send,
                                                std::span<const std::size_t> send_bytes, std::span<std::byte> recv,
                                                std::span<const std::size_t> recv_bytes) {
  if (all_to_all_) return Error{"context exchange: an all-to-all began while another is in flight"};
  const auto ranks = static_cast<std::size_t>(shards());
  const auto words = [](std::span<const std::size_t> sizes) {
    return std::all_of(sizes.begin(), sizes.end(), [](std::size_t b) { return b % 4 == 0; });
  };
  if (send_bytes.size() != ranks || recv_bytes.size() != ranks || !words(send_bytes) || !words(recv_bytes) ||
      std::accumulate(send_bytes.begin(), send_bytes.end(), std::size_t{0}) != send.size() ||
      std::accumulate(recv_bytes.begin(), recv_bytes.end(), std::size_t{0}) != recv.size())
    return Error{"context exchange: an all-to-all needs whole-word blocks that add up to its buffers"};
  const auto began = std::chrono::steady_clock::now();
  const auto r = static_cast<std::size_t>(rank());
  if (send_bytes[r] != recv_bytes[r]) return Error{"context exchange: a rank's block to itself changed size"};
  const comm::MessageKey key = next_key();
  ++sequence_;
  std::vector<std::size_t> send_at(ranks + 1, 0), recv_at(ranks + 1, 0);
  for (std::size_t j = 0; j < ranks; ++j) {
    send_at[j + 1] = send_at[j] + send_bytes[j];
    recv_at[j + 1] = recv_at[j] + recv_bytes[j];
  }
  InFlight op{{}, all_to_all_received_.take(recv.size()), recv, send.size() - send_bytes[r], key.sequence, began, {}};
  // The blocks to the others copied to a buffer of the exchange's; the rank's own block goes
  // straight to its place among the received ones.
  const compute::Tensor sent = all_to_all_sent_.take(send.size());
  copy_into(sent, 0, send.first(send_at[r]));
  copy_into(sent, send_at[r + 1], send.subspan(send_at[r + 1]));
  copy_into(op.received, recv_at[r], send.subspan(send_at[r], send_bytes[r]));
  for (std::size_t j = 0; j < ranks; ++j) {
    if (j == r || recv_bytes[j] == 0) continue;
    op.transfers.push_back(
        mailbox_.recv(engine_, peer(static_cast<int>(j)), key, part(op.received, recv_at[j], recv_bytes[j])));
  }
  for (std::size_t j = 0; j < ranks; ++j) {
    if (j == r || send_bytes[j] == 0) continue;
    op.transfers.push_back(mailbox_.send(engine_, peer(static_cast<int>(j)), key, part(sent, send_at[j], send_bytes[j])));
  }
  op.spent = std::chrono::steady_clock::now() - began;
  all_to_all_ = std::move(op);
  return Status::success();
}

Status MailboxContextExchange::finish_all_to_all() {
  if (!all_to_all_) return Error{"context exchange: finish_all_to_all without an all-to-all in flight"};
  const InFlight op = std::move(*all_to_all_);
  all_to_all_.reset();
  finish(op, comm::ContextTraffic::all_to_all);
  return Status::success();
}

}  // namespace troupe::actors
