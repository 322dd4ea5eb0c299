#include "compute/context/local_exchange.hpp"

#include <algorithm>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace troupe::compute::context {

class LocalContextGroup::Rank final : public ContextExchange {
 public:
  Rank(LocalContextGroup& group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int shards() const override { return group_.shards_; }
  Status begin_shift(std::span<const std::byte> send, std::span<std::byte> recv) override {
    if (pending_) return Error{"context exchange: a ring shift began while another is in flight"};
    group_.post_shift((rank_ + 1) % group_.shards_, send);
    pending_ = recv;
    return Status::success();
  }
  Status finish_shift() override {
    if (!pending_) return Error{"context exchange: finish_shift without a shift in flight"};
    const std::span<std::byte> into = *pending_;
    pending_.reset();
    return group_.take_shift(rank_, into);
  }
  Status begin_all_to_all(std::span<const std::byte> send, std::span<const std::size_t> send_bytes,
                          std::span<std::byte> recv, std::span<const std::size_t> recv_bytes) override {
    if (blocks_pending_) return Error{"context exchange: an all-to-all began while another is in flight"};
    if (Status posted = group_.post_blocks(rank_, send, send_bytes, recv, recv_bytes); !posted) return posted;
    blocks_pending_ = {recv, std::vector<std::size_t>(recv_bytes.begin(), recv_bytes.end())};
    return Status::success();
  }
  Status finish_all_to_all() override {
    if (!blocks_pending_) return Error{"context exchange: finish_all_to_all without an all-to-all in flight"};
    const auto [into, sizes] = std::move(*blocks_pending_);
    blocks_pending_.reset();
    return group_.take_blocks(rank_, into, sizes);
  }

 private:
  LocalContextGroup& group_;
  int rank_;
  std::optional<std::span<std::byte>> pending_;
  std::optional<std::pair<std::span<std::byte>, std::vector<std::size_t>>> blocks_pending_;
};

LocalContextGroup::LocalContextGroup(int shards) : shards_(shards), boxes_(shards) {
  for (int r = 0; r < shards; ++r) {
    boxes_[r].blocks.resize(shards);
    ranks_.push_back(std::make_unique<Rank>(*this, r));
  }
}

LocalContextGroup::~LocalContextGroup() = default;

ContextExchange& LocalContextGroup::rank(int r) { return *ranks_.at(r); }

void LocalContextGroup::post_shift(int to, std::span<const std::byte> bytes) {
  {
    const std::lock_guard lock(mutex_);
    boxes_[to].shifts.emplace_back(bytes.begin(), bytes.end());
  }
  changed_.notify_all();
}

Status LocalContextGroup::take_shift(int at, std::span<std::byte> into) {
  std::unique_lock lock(mutex_);
  changed_.wait(lock, [&] { return !boxes_[at].shifts.empty(); });
  const std::vector<std::byte> got = std::move(boxes_[at].shifts.front());
  boxes_[at].shifts.pop_front();
  if (got.size() != into.size()) {
    return Error{"context exchange: rank " + std::to_string(at) + " expected a ring block of " +
                 std::to_string(into.size()) + " bytes and got " + std::to_string(got.size())};
  }
  std::copy(got.begin(), got.end(), into.begin());
  return Status::success();
}

Status LocalContextGroup::post_blocks(int r, std::span<const std::byte> send, std::span<const std::size_t> send_bytes,
                                      std::span<const std::byte> recv, std::span<const std::size_t> recv_bytes) {
  const std::size_t ranks = static_cast<std::size_t>(shards_);
  if (send_bytes.size() != ranks || recv_bytes.size() != ranks ||
      std::accumulate(send_bytes.begin(), send_bytes.end(), std::size_t{0}) != send.size() ||
      std::accumulate(recv_bytes.begin(), recv_bytes.end(), std::size_t{0}) != recv.size()) {
    return Error{"context exchange: an all-to-all of " + std::to_string(send.size()) + " bytes into " +
                 std::to_string(recv.size()) + " whose blocks do not add up over " + std::to_string(shards_) +
                 " ranks"};
  }
  {
    const std::lock_guard lock(mutex_);
    std::size_t at = 0;
    for (std::size_t j = 0; j < ranks; ++j) {
      const auto first = send.begin() + static_cast<std::ptrdiff_t>(at);
      boxes_[j].blocks[r].emplace_back(first, first + static_cast<std::ptrdiff_t>(send_bytes[j]));
      at += send_bytes[j];
    }
  }
  changed_.notify_all();
  return Status::success();
}

Status LocalContextGroup::take_blocks(int r, std::span<std::byte> recv, std::span<const std::size_t> recv_bytes) {
  const std::size_t ranks = static_cast<std::size_t>(shards_);
  std::unique_lock lock(mutex_);
  Mailbox& box = boxes_[r];
  changed_.wait(lock, [&] {
    return std::all_of(box.blocks.begin(), box.blocks.end(), [](const auto& q) { return !q.empty(); });
  });
  std::size_t at = 0;
  for (std::size_t i = 0; i < ranks; ++i) {
    const std::vector<std::byte> got = std::move(box.blocks[i].front());
    box.blocks[i].pop_front();
    if (got.size() != recv_bytes[i]) {
      return Error{"context exchange: rank " + std::to_string(r) + " expected an all-to-all block of " +
                   std::to_string(recv_bytes[i]) + " bytes from rank " + std::to_string(i) + " and got " +
                   std::to_string(got.size())};
    }
    std::copy(got.begin(), got.end(), recv.begin() + static_cast<std::ptrdiff_t>(at));
    at += got.size();
  }
  return Status::success();
}

}  // namespace troupe::compute::context
