#include "actors/worker/mailbox_context_exchange.hpp"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

namespace troupe::actors {
namespace {

// A tensor over bytes the caller keeps alive until the operation ends (the context attention's
// buffers, which outlive its waits).
compute::Tensor over(const void* data, std::size_t bytes) {
  return compute::Tensor::adopt(const_cast<void*>(data), {static_cast<std::int64_t>(bytes / 4)}, compute::DType::f32,
                                compute::Device::cpu, [](void*) {});
}

}  // namespace

MailboxContextExchange::MailboxContextExchange(MailboxComm& mailbox, comm::Engine& engine, comm::Group group)
    : mailbox_(mailbox),
      engine_(engine),
      group_(std::move(group)),
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

void MailboxContextExchange::finished(comm::ContextTraffic kind, std::uint64_t bytes,
                                      std::chrono::steady_clock::time_point posted,
                                      std::chrono::steady_clock::duration spent, std::uint16_t sequence) {
  engine_.traffic()->context_finished(kind, bytes, spent);
  if (trace_ == nullptr) return;
  using micros = std::chrono::duration<double, std::micro>;
  trace_->add_complete({trace_process(), rank()}, comm::context_traffic_name(kind), "transfer",
                       micros(posted.time_since_epoch()).count(),
                       micros(std::chrono::steady_clock::now() - posted).count(),
                       {{"bytes", std::to_string(bytes)}, {"sequence", std::to_string(sequence)}});
}

void MailboxContextExchange::renew(int epoch) {
  shift_.reset();
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
  const MailboxComm::Operation sent = mailbox_.send(engine_, peer(r + 1), key, over(send.data(), send.size()));
  const MailboxComm::Operation got =
      mailbox_.recv(engine_, peer(r + shards() - 1), key, over(recv.data(), recv.size()));
  shift_ = {sent, got};
  shift_bytes_ = send.size();
  shift_sequence_ = key.sequence;
  shift_posted_ = began;
  shift_spent_ = std::chrono::steady_clock::now() - began;
  return Status::success();
}

Status MailboxContextExchange::finish_shift() {
  if (!shift_) return Error{"context exchange: finish_shift without a shift in flight"};
  const auto began = std::chrono::steady_clock::now();
  const auto [sent, got] = *shift_;
  shift_.reset();
  check_comm(mailbox_.wait(got));
  check_comm(mailbox_.wait(sent));
  finished(comm::ContextTraffic::ring_shift, shift_bytes_, shift_posted_,
           shift_spent_ + (std::chrono::steady_clock::now() - began), shift_sequence_);
  return Status::success();
}

Status MailboxContextExchange::all_to_all(std::span<const std::byte> send, std::span<std::byte> recv) {
  const std::size_t block = send.size() / static_cast<std::size_t>(shards());
  if (send.size() != recv.size() || block * static_cast<std::size_t>(shards()) != send.size() || block % 4 != 0)
    return Error{"context exchange: an all-to-all needs equal whole-word blocks for every rank"};
  const auto began = std::chrono::steady_clock::now();
  const int r = rank();
  const comm::MessageKey key = next_key();
  ++sequence_;
  std::vector<MailboxComm::Operation> ops;
  for (int j = 0; j < shards(); ++j) {
    if (j == r) continue;
    ops.push_back(mailbox_.recv(engine_, peer(j), key, over(recv.data() + j * block, block)));
  }
  for (int j = 0; j < shards(); ++j) {
    if (j == r) continue;
    ops.push_back(mailbox_.send(engine_, peer(j), key, over(send.data() + j * block, block)));
  }
  std::copy(send.begin() + r * block, send.begin() + (r + 1) * block, recv.begin() + r * block);
  Status first_failure;
  for (MailboxComm::Operation op : ops) {
    Status s = mailbox_.wait(op);
    if (!s && first_failure) first_failure = s;
  }
  check_comm(first_failure);
  finished(comm::ContextTraffic::all_to_all, send.size() - block, began, std::chrono::steady_clock::now() - began,
           key.sequence);
  return Status::success();
}

}  // namespace troupe::actors
