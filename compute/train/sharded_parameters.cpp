#include "compute/train/sharded_parameters.hpp"

#include <algorithm>
#include <chrono>
#include <utility>

#include "compute/memory_ledger.hpp"

namespace troupe::compute {

ShardedParameters::ShardedParameters(Backend& backend, std::vector<ParameterUnit> units, DType dtype, int position,
                                     std::vector<std::int64_t> shards, ShardExchange exchange,
                                     bool reshard_after_forward)
    : ShardedParameters(backend, std::move(units), dtype, {{std::move(shards), position, std::move(exchange)}},
                        reshard_after_forward) {}

ShardedParameters::ShardedParameters(Backend& backend, std::vector<ParameterUnit> units, DType dtype,
                                     std::vector<RunShards> runs, bool reshard_after_forward)
    : backend_(backend), units_(std::move(units)), dtype_(dtype), reshard_after_forward_(reshard_after_forward) {
  TROUPE_CHECK(!units_.empty() && !runs.empty(), "ZeRO-3 needs units and at least one run");
  std::int64_t covered = 0, kept = 0;
  for (RunShards& sharded : runs) {
    const std::vector<std::int64_t>& shards = sharded.shards;
    TROUPE_CHECK(shards.size() >= 2 && shards.front() == covered && std::is_sorted(shards.begin(), shards.end()),
                 "ZeRO-3 shards must cover the stage's buffer in order");
    TROUPE_CHECK(0 <= sharded.position && sharded.position + 1 < static_cast<int>(shards.size()),
                 "ZeRO-3 position outside the group");
    Run run{std::move(sharded)};
    const auto p = static_cast<std::size_t>(run.sharded.position);
    run.begin = run.sharded.shards[p];
    run.end = run.sharded.shards[p + 1];
    run.kept_at = kept;
    TROUPE_CHECK(!run.exchanges() || (run.sharded.exchange.start_all_gather &&
                                      run.sharded.exchange.start_reduce_scatter && run.sharded.exchange.wait),
                 "a ZeRO-3 group of more than one rank needs its exchange");
    covered = run.sharded.shards.back();
    kept += run.end - run.begin;
    runs_.push_back(std::move(run));
  }
  TROUPE_CHECK(covered == units_.back().end, "ZeRO-3 shards must cover the stage's buffer in order");
  {
    MemoryScope scope(MemoryKind::parameters);
    params_ = backend_.zeros({kept}, dtype_);
  }
  MemoryScope scope(MemoryKind::gradients);
  grads_ = backend_.zeros({kept}, dtype_);
}

std::vector<ParameterUnit> ShardedParameters::kept_runs() const {
  std::vector<ParameterUnit> kept;
  for (const Run& run : runs_) kept.push_back({run.begin, run.end});
  return kept;
}

std::vector<ShardedParameters::Pending> ShardedParameters::start(const ParameterUnit& unit, const Tensor& buffer,
                                                                 bool gather) {
  std::vector<Pending> pending;
  for (std::size_t r = 0; r < runs_.size(); ++r) {
    const Run& run = runs_[r];
    const std::vector<std::int64_t>& shards = run.sharded.shards;
    const std::int64_t lo = std::max(unit.begin, shards.front()), hi = std::min(unit.end, shards.back());
    if (lo >= hi || !run.exchanges()) continue;
    // Each position's piece of [lo, hi): the part inside its shard, in order.
    std::vector<std::int64_t> counts;
    for (std::size_t p = 0; p + 1 < shards.size(); ++p)
      counts.push_back(std::max<std::int64_t>(0, std::min(hi, shards[p + 1]) - std::max(lo, shards[p])));
    Tensor piece = buffer.slice(lo - unit.begin, {hi - lo});
    const ShardExchange& exchange = run.sharded.exchange;
    pending.push_back({r, gather ? exchange.start_all_gather(piece, std::move(counts))
                                 : exchange.start_reduce_scatter(piece, std::move(counts))});
  }
  return pending;
}

void ShardedParameters::wait(std::vector<Pending>& pending) {
  const auto start = std::chrono::steady_clock::now();
  for (const Pending& p : pending) runs_[p.run].sharded.exchange.wait(p.ticket);
  pending.clear();
  waited_seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

double ShardedParameters::take_waited_seconds() { return std::exchange(waited_seconds_, 0.0); }

Tensor ShardedParameters::take(std::multimap<std::int64_t, Tensor>& pool, std::int64_t size, bool gradients) {
  if (auto it = pool.find(size); it != pool.end()) {
    Tensor t = std::move(it->second);
    pool.erase(it);
    return t;
  }
  MemoryScope scope(gradients ? MemoryKind::gradients : MemoryKind::gathered_parameters);
  Tensor t = backend_.zeros({size}, dtype_);
  (gradients ? gradient_bytes_ : gathered_bytes_) += static_cast<std::int64_t>(t.nbytes());
  return t;
}

ShardedParameters::Gathered& ShardedParameters::gather(int unit) {
  if (auto it = gathered_.find(unit); it != gathered_.end()) return it->second;
  const ParameterUnit& u = units_.at(static_cast<std::size_t>(unit));
  Gathered g{take(free_parameters_, u.size(), false), {}};
  for (const Run& run : runs_) {
    const std::int64_t lo = std::max(u.begin, run.begin), hi = std::min(u.end, run.end);
    if (lo >= hi) continue;
    Tensor own = g.buffer.slice(lo - u.begin, {hi - lo});
    backend_.copy(own, params_.slice(run.kept_at + lo - run.begin, {hi - lo}));
  }
  g.pending = start(u, g.buffer, true);
  return gathered_.emplace(unit, std::move(g)).first->second;
}

Tensor ShardedParameters::use(int unit, int next) {
  Gathered& g = gather(unit);
  wait(g.pending);
  Tensor buffer = g.buffer;
  if (next >= 0) gather(next);
  return buffer;
}

void ShardedParameters::done_with(int unit, Reuse reuse) {
  if (hold_for_step_ || reuse == Reuse::first_in_backward || (reuse == Reuse::in_backward && !reshard_after_forward_))
    return;
  release(unit);
}

void ShardedParameters::release(int unit) {
  auto it = gathered_.find(unit);
  if (it == gathered_.end()) return;
  // A prefetch still in flight writes into the buffer: it must land before the buffer is reused.
  wait(it->second.pending);
  free_parameters_.emplace(it->second.buffer.numel(), std::move(it->second.buffer));
  gathered_.erase(it);
}

void ShardedParameters::release_all() {
  while (!gathered_.empty()) release(gathered_.begin()->first);
}

void ShardedParameters::abandon_step() {
  for (auto& [unit, gathered] : gathered_) free_parameters_.emplace(gathered.buffer.numel(), std::move(gathered.buffer));
  for (auto& [unit, buffer] : open_gradients_) free_gradients_.emplace(buffer.numel(), std::move(buffer));
  for (auto& [unit, buffer] : deferred_gradients_) free_gradients_.emplace(buffer.numel(), std::move(buffer));
  for (Reducing& reducing : reducing_) free_gradients_.emplace(reducing.buffer.numel(), std::move(reducing.buffer));
  gathered_.clear();
  open_gradients_.clear();
  deferred_gradients_.clear();
  reducing_.clear();
}

Tensor ShardedParameters::gradient(int unit) {
  if (hold_for_step_ || deferred_.count(unit)) {
    auto it = deferred_gradients_.find(unit);
    if (it == deferred_gradients_.end()) {
      Tensor buffer = take(free_gradients_, units_.at(static_cast<std::size_t>(unit)).size(), true);
      backend_.fill_zero(buffer);
      it = deferred_gradients_.emplace(unit, buffer).first;
    }
    return it->second;
  }
  TROUPE_CHECK(!open_gradients_.count(unit), "unit " + std::to_string(unit) + "'s gradient asked for twice");
  Tensor buffer = take(free_gradients_, units_.at(static_cast<std::size_t>(unit)).size(), true);
  backend_.fill_zero(buffer);
  open_gradients_.emplace(unit, buffer);
  return buffer;
}

void ShardedParameters::gradient_done(int unit) {
  if (hold_for_step_ || deferred_.count(unit)) return;
  auto it = open_gradients_.find(unit);
  TROUPE_CHECK(it != open_gradients_.end(), "unit " + std::to_string(unit) + "'s gradient finished unasked");
  Reducing r{unit, std::move(it->second), {}};
  open_gradients_.erase(it);
  // The reduce-scatter posted before this one had this unit's whole backward to travel.
  while (!reducing_.empty()) fold_oldest();
  r.pending = start(units_[static_cast<std::size_t>(unit)], r.buffer, false);
  reducing_.push_back(std::move(r));
}

void ShardedParameters::fold_oldest() {
  Reducing r = std::move(reducing_.front());
  reducing_.erase(reducing_.begin());
  wait(r.pending);
  const ParameterUnit& u = units_.at(static_cast<std::size_t>(r.unit));
  for (const Run& run : runs_) {
    const std::int64_t lo = std::max(u.begin, run.begin), hi = std::min(u.end, run.end);
    if (lo >= hi) continue;
    Tensor into = grads_.slice(run.kept_at + lo - run.begin, {hi - lo});
    backend_.residual_forward(into, into, r.buffer.slice(lo - u.begin, {hi - lo}));
  }
  free_gradients_.emplace(r.buffer.numel(), std::move(r.buffer));
}

Tensor ShardedParameters::deferred_gradient(int unit) const {
  auto it = deferred_gradients_.find(unit);
  TROUPE_CHECK(it != deferred_gradients_.end(), "unit " + std::to_string(unit) + " has no deferred gradient this step");
  return it->second;
}

void ShardedParameters::finish_gradients() {
  if (hold_for_step_) release_all();
  for (auto& [unit, buffer] : deferred_gradients_) {
    Reducing r{unit, std::move(buffer), {}};
    r.pending = start(units_[static_cast<std::size_t>(unit)], r.buffer, false);
    reducing_.push_back(std::move(r));
  }
  deferred_gradients_.clear();
  while (!reducing_.empty()) fold_oldest();
  // A copy still gathered now would miss the optimizer's update and serve stale values.
  TROUPE_CHECK(gathered_.empty() && open_gradients_.empty(), "ZeRO-3 units still gathered after the backward");
}

}  // namespace troupe::compute
