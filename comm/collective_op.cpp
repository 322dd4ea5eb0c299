#include "comm/collective_op.hpp"

#include <string_view>

#include "comm/grid.hpp"

namespace troupe::comm {

CollectiveOp::CollectiveOp(Engine& engine, TrafficKind kind, const Group& group, MessageKey key,
                           compute::Tensor buffer, Callback done)
    : engine_(engine),
      kind_(kind),
      posted_(std::chrono::steady_clock::now()),
      group_(group),
      key_(key),
      buffer_(std::move(buffer)),
      done_(std::move(done)) {
  engine_.traffic()->collectives_in_flight.fetch_add(1, std::memory_order_relaxed);
}

CollectiveOp::~CollectiveOp() {
  if (!finished_) engine_.traffic()->collectives_in_flight.fetch_sub(1, std::memory_order_relaxed);
}

void CollectiveOp::start() {
  std::vector<int> others;
  for (int rank : group_.ranks) {
    if (rank != engine_.rank()) others.push_back(rank);
  }
  watch_ =
      engine_.watch_peers(std::move(others), [self = shared_from_this()](const Error& error) { self->finish(error); });
  begin();
  if (!finished_ && completed_ == expected_) finish({});
}

void CollectiveOp::abandon(const std::string& why) { finish(Error{why}); }

std::byte* CollectiveOp::bytes_at(std::int64_t element) const {
  return static_cast<std::byte*>(buffer_.data()) + element * compute::dtype_size(buffer_.dtype());
}

void CollectiveOp::send(int peer, std::uint32_t index, const void* data, std::size_t bytes,
                        std::function<void()> then) {
  MessageKey key = key_;
  key.index = static_cast<std::uint16_t>(index);
  const std::uint64_t slot = std::uint64_t{index} * 2;
  auto done = [self = shared_from_this(), slot, then = std::move(then)](Status status) {
    self->on_done(slot, status, then);
  };
  in_flight_[slot] = buffer_.moves_as_token() && bytes > 0 ? engine_.post_token_send(peer, key, bytes, std::move(done))
                                                           : engine_.post_send(peer, key, data, bytes, std::move(done));
}

void CollectiveOp::recv(int peer, std::uint32_t index, void* data, std::size_t bytes, std::function<void()> then) {
  MessageKey key = key_;
  key.index = static_cast<std::uint16_t>(index);
  const std::uint64_t slot = std::uint64_t{index} * 2 + 1;
  auto done = [self = shared_from_this(), slot, then = std::move(then)](Status status) {
    self->on_done(slot, status, then);
  };
  in_flight_[slot] = buffer_.moves_as_token() && bytes > 0 ? engine_.post_token_recv(peer, key, bytes, std::move(done))
                                                           : engine_.post_recv(peer, key, data, bytes, std::move(done));
}

void CollectiveOp::on_done(std::uint64_t slot, const Status& status, const std::function<void()>& then) {
  in_flight_.erase(slot);
  if (finished_) return;
  if (!status) {
    finish(status);
    return;
  }
  if (then) then();
  ++completed_;
  if (!finished_ && completed_ == expected_) finish({});
}

void CollectiveOp::finish(Status status) {
  if (finished_) return;
  finished_ = true;
  engine_.unwatch_peers(watch_);
  Traffic& traffic = *engine_.traffic();
  traffic.collectives_in_flight.fetch_sub(1, std::memory_order_relaxed);
  if (status) {
    // A barrier's one-element tensor only lets it share this machinery; its messages carry nothing.
    const auto bytes = kind_ == TrafficKind::barrier
                           ? 0
                           : static_cast<std::uint64_t>(buffer_.numel()) * compute::dtype_size(buffer_.dtype());
    traffic.finished(kind_, bytes, std::chrono::steady_clock::now() - posted_, group_.id == tp_group_id);
    done_({});
    return;
  }
  for (const auto& [slot, id] : in_flight_) engine_.cancel(id);
  release_after_failure();
  std::string_view cause = status.error().message;
  if (cause.starts_with("comm: ")) cause.remove_prefix(6);
  done_(Error{"comm: " + std::string(traffic_name(kind_)) + " on " + group_.describe() + " (sequence " + std::to_string(key_.sequence) +
              ") failed: " + std::string(cause)});
}

}  // namespace troupe::comm
