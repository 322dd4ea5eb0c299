#include "comm/collectives.hpp"

#include <algorithm>
#include <future>
#include <unordered_set>

#include "comm/chain_broadcast.hpp"
#include "comm/collective_op.hpp"
#include "comm/dissemination_barrier.hpp"
#include "comm/knobs.hpp"
#include "comm/reduce_sum.hpp"
#include "comm/ring.hpp"

namespace troupe::comm {
namespace {

template <typename Post>
Status wait_for(const Engine& engine, Post post) {
  TROUPE_CHECK(!engine.on_progress_thread(), "a blocking collective on the progress thread would never end");
  auto promise = std::make_shared<std::promise<Status>>();
  std::future<Status> result = promise->get_future();
  post([promise](Status status) { promise->set_value(std::move(status)); });
  return result.get();
}

}  // namespace

CollectiveOptions CollectiveOptions::from_environment() {
  return CollectiveOptions{std::max<std::int64_t>(knob_value(knob_chunk_bytes), 1),
                           static_cast<int>(std::max<std::int64_t>(knob_value(knob_window), 1)), true};
}

struct Communicator::LiveOps {
  std::vector<std::weak_ptr<CollectiveOp>> ops;
};

Communicator::Communicator(Engine& engine, Group group, int position, CollectiveOptions options)
    : engine_(engine),
      group_(std::move(group)),
      position_(position),
      options_(options),
      live_(std::make_shared<LiveOps>()) {}

// Starts `op` on the progress thread, remembered among the live ones (ended ones are forgotten
// there, so the list stays as short as what is in flight).
void Communicator::post_op(std::shared_ptr<CollectiveOp> op) {
  engine_.post([op = std::move(op), live = live_] {
    std::erase_if(live->ops, [](const std::weak_ptr<CollectiveOp>& o) { return o.expired(); });
    live->ops.push_back(op);
    op->start();
  });
}

Communicator::~Communicator() {
  engine_.post([live = live_] {
    for (const std::weak_ptr<CollectiveOp>& weak : live->ops)
      if (auto op = weak.lock()) op->abandon("comm: abandoned: its communicator is gone");
  });
}

void Communicator::abandon_and_renew(const std::string& why, Group renewed) {
  TROUPE_CHECK(renewed.id <= max_group_id, "group id out of the tag's 12 bits");
  const int position = renewed.position_of(engine_.rank());
  TROUPE_CHECK(position >= 0, "a communicator renewed as a group without its own rank");
  for (int rank : renewed.ranks)
    TROUPE_CHECK(rank >= 0 && rank < engine_.world_size(), "a communicator renewed over a rank outside the world");
  // Tasks run in order on the progress thread: every operation posted before this is live there.
  (void)wait_for(engine_, [&](Callback done) {
    engine_.post([live = live_, why, done = std::move(done)] {
      for (const std::weak_ptr<CollectiveOp>& weak : live->ops)
        if (auto op = weak.lock()) op->abandon("comm: abandoned: " + why);
      live->ops.clear();
      done({});
    });
  });
  group_ = std::move(renewed);
  position_ = position;
  sequence_ = 0;
}

Expected<std::unique_ptr<Communicator>> Communicator::create(Engine& engine, Group group, CollectiveOptions options) {
  const std::string name = "comm: " + group.describe();
  if (group.id > max_group_id) return Error{name + ": group id above " + std::to_string(max_group_id)};
  std::unordered_set<int> seen;
  for (int rank : group.ranks) {
    if (rank < 0 || rank >= engine.world_size()) {
      return Error{name + ": rank " + std::to_string(rank) + " is outside the world of " +
                   std::to_string(engine.world_size())};
    }
    if (!seen.insert(rank).second) return Error{name + ": rank " + std::to_string(rank) + " appears twice"};
  }
  const int position = group.position_of(engine.rank());
  if (position < 0) return Error{name + ": rank " + std::to_string(engine.rank()) + " is not a member"};
  if (options.chunk_bytes < 1 || options.window < 1) return Error{name + ": chunk size and window must be positive"};
  return std::unique_ptr<Communicator>(new Communicator(engine, std::move(group), position, options));
}

MessageKey Communicator::next_key() {
  return MessageKey{MessageKind::collective, group_.id, static_cast<std::uint16_t>(sequence_++ & 0xffff), 0};
}

bool Communicator::accept(const compute::Tensor& buffer, bool reduces, const char* what, const Callback& done) {
  std::string problem;
  if (!buffer.defined()) {
    problem = "no buffer";
  } else if (buffer.device() != compute::Device::cpu) {
    problem = buffer.describe() + " is not in host memory";
  } else if (reduces && !reducible(buffer.dtype())) {
    problem = buffer.describe() + ": only f32, f64 and bf16 are summed";
  }
  if (problem.empty()) return true;
  engine_.post([done, error = Error{"comm: " + std::string(what) + " on " + group_.describe() + ": " + problem}] {
    done(error);
  });
  return false;
}

bool Communicator::accept_segments(const compute::Tensor& buffer, const std::vector<Slice>& segments, const char* what,
                                   const Callback& done) {
  std::string problem;
  if (static_cast<int>(segments.size()) != group_.size()) {
    problem = std::to_string(segments.size()) + " segments for " + std::to_string(group_.size()) + " ranks";
  } else {
    std::int64_t next = 0;
    for (const Slice& s : segments) {
      if (s.offset != next || s.count < 0) problem = "segments that do not follow one another";
      next = s.offset + s.count;
    }
    if (problem.empty() && next != buffer.numel())
      problem = "segments that cover " + std::to_string(next) + " of " + std::to_string(buffer.numel()) + " elements";
  }
  if (problem.empty()) return true;
  engine_.post([done, error = Error{"comm: " + std::string(what) + " on " + group_.describe() + ": " + problem}] {
    done(error);
  });
  return false;
}

void Communicator::post_ring(compute::Tensor buffer, RingPhases ring_phases, std::vector<Slice> segments,
                             Callback done) {
  const MessageKey key = next_key();
  const std::int64_t wanted =
      std::max<std::int64_t>(options_.chunk_bytes / static_cast<std::int64_t>(compute::dtype_size(buffer.dtype())), 1);
  std::int64_t largest = segment_of(buffer.numel(), group_.size(), 0).count;
  if (!segments.empty()) {
    largest = 0;
    for (const Slice& s : segments) largest = std::max(largest, s.count);
  }
  // A token buffer's hop is one message: chunks pipeline copies and sums, which it has none of.
  const RingShape shape{
      ring_chunk_elements(largest, group_.size(), ring_phases, buffer.moves_as_token() ? largest : wanted),
      options_.window, scratch_, options_.mapped_blocks, std::move(segments)};
  // The task holds the only strong reference, so the operation ends its life on the progress thread.
  post_op(make_ring_op(engine_, group_, key, ring_phases, std::move(buffer), shape, std::move(done)));
}

void Communicator::post_all_reduce(compute::Tensor buffer, Callback done) {
  if (!accept(buffer, true, "all_reduce", done)) return;
  const AllReduceAlgorithm algorithm =
      options_.all_reduce.value_or(all_reduce_algorithm(group_.size(), buffer.nbytes()));
  if (algorithm == AllReduceAlgorithm::recursive_doubling) {
    post_op(make_recursive_doubling_op(engine_, group_, next_key(), std::move(buffer), std::move(done)));
  } else {
    post_ring(std::move(buffer), RingPhases::all_reduce, {}, std::move(done));
  }
}

void Communicator::post_reduce_scatter(compute::Tensor buffer, Callback done) {
  if (accept(buffer, true, "reduce_scatter", done)) {
    post_ring(std::move(buffer), RingPhases::reduce_scatter, {}, std::move(done));
  }
}

void Communicator::post_all_gather(compute::Tensor buffer, Callback done) {
  if (accept(buffer, false, "all_gather", done)) post_ring(std::move(buffer), RingPhases::all_gather, {}, std::move(done));
}

void Communicator::post_reduce_scatter(compute::Tensor buffer, std::vector<Slice> segments, Callback done) {
  if (accept(buffer, true, "reduce_scatter", done) && accept_segments(buffer, segments, "reduce_scatter", done)) {
    post_ring(std::move(buffer), RingPhases::reduce_scatter, std::move(segments), std::move(done));
  }
}

void Communicator::post_all_gather(compute::Tensor buffer, std::vector<Slice> segments, Callback done) {
  if (accept(buffer, false, "all_gather", done) && accept_segments(buffer, segments, "all_gather", done)) {
    post_ring(std::move(buffer), RingPhases::all_gather, std::move(segments), std::move(done));
  }
}

void Communicator::post_broadcast(compute::Tensor buffer, int root, Callback done) {
  if (!accept(buffer, false, "broadcast", done)) return;
  if (root < 0 || root >= group_.size()) {
    engine_.post([done, error = Error{"comm: broadcast on " + group_.describe() + ": root position " +
                                      std::to_string(root) + " is outside the group"}] { done(error); });
    return;
  }
  const std::int64_t chunk =
      std::max<std::int64_t>(options_.chunk_bytes / static_cast<std::int64_t>(compute::dtype_size(buffer.dtype())),
                             (buffer.numel() + max_messages_per_operation - 1) / max_messages_per_operation);
  post_op(make_chain_broadcast_op(engine_, group_, next_key(), root, std::move(buffer), std::max<std::int64_t>(chunk, 1),
                                  std::move(done)));
}

void Communicator::post_barrier(Callback done) {
  post_op(make_dissemination_barrier_op(engine_, group_, next_key(), std::move(done)));
}

Status Communicator::all_reduce(compute::Tensor buffer) {
  return wait_for(engine_, [&](Callback done) { post_all_reduce(buffer, std::move(done)); });
}

Status Communicator::reduce_scatter(compute::Tensor buffer) {
  return wait_for(engine_, [&](Callback done) { post_reduce_scatter(buffer, std::move(done)); });
}

Status Communicator::all_gather(compute::Tensor buffer) {
  return wait_for(engine_, [&](Callback done) { post_all_gather(buffer, std::move(done)); });
}

Status Communicator::reduce_scatter(compute::Tensor buffer, std::vector<Slice> segments) {
  return wait_for(engine_, [&](Callback done) { post_reduce_scatter(buffer, std::move(segments), std::move(done)); });
}

Status Communicator::all_gather(compute::Tensor buffer, std::vector<Slice> segments) {
  return wait_for(engine_, [&](Callback done) { post_all_gather(buffer, std::move(segments), std::move(done)); });
}

Status Communicator::broadcast(compute::Tensor buffer, int root) {
  return wait_for(engine_, [&](Callback done) { post_broadcast(buffer, root, std::move(done)); });
}

Status Communicator::barrier() {
  return wait_for(engine_, [&](Callback done) { post_barrier(std::move(done)); });
}

}  // namespace troupe::comm
