#include "actors/job_events.hpp"

#include <algorithm>
#include <chrono>

#include <spdlog/fmt/fmt.h>

namespace troupe::actors {

std::string_view to_string(RecoveryRoute route) {
  switch (route) {
    case RecoveryRoute::in_place_from_replica: return "in_place_from_replica";
    case RecoveryRoute::in_place_rollback: return "in_place_rollback";
    case RecoveryRoute::restart_from_replica: return "restart_from_replica";
    case RecoveryRoute::restart_from_checkpoint: return "restart_from_checkpoint";
    case RecoveryRoute::shrink: return "shrink";
    case RecoveryRoute::grow_in_place: return "grow_in_place";
    case RecoveryRoute::grow_by_restart: return "grow_by_restart";
    case RecoveryRoute::restart: return "restart";
    case RecoveryRoute::rescue: return "rescue";
    case RecoveryRoute::stop: return "stop";
    case RecoveryRoute::island_left_out: return "island_left_out";
  }
  return "unknown";
}

std::string_view to_string(CheckpointOutcome outcome) {
  switch (outcome) {
    case CheckpointOutcome::committed: return "committed";
    case CheckpointOutcome::failed: return "failed";
    case CheckpointOutcome::skipped: return "skipped";
  }
  return "unknown";
}

namespace {

std::string list(const std::vector<int>& values) { return fmt::format("{}", fmt::join(values, ",")); }

struct Name {
  std::string_view operator()(const node_joined&) const { return "node_joined"; }
  std::string_view operator()(const job_started&) const { return "job_started"; }
  std::string_view operator()(const step_trained&) const { return "step_trained"; }
  std::string_view operator()(const failure_detected&) const { return "failure_detected"; }
  std::string_view operator()(const recovery_chosen&) const { return "recovery_chosen"; }
  std::string_view operator()(const state_moved&) const { return "state_moved"; }
  std::string_view operator()(const training_resumed&) const { return "training_resumed"; }
  std::string_view operator()(const straggler_named&) const { return "straggler_named"; }
  std::string_view operator()(const checkpoint_noted&) const { return "checkpoint_noted"; }
  std::string_view operator()(const layout_changed&) const { return "layout_changed"; }
  std::string_view operator()(const attempt_ended&) const { return "attempt_ended"; }
  std::string_view operator()(const job_ended&) const { return "job_ended"; }
};

// The body's fields as "name=value" pairs, in the order docs/protocols/job-events.md lists them.
struct Fields {
  std::string operator()(const node_joined& e) const {
    return fmt::format("node={} host={} pid={} replaced_pid={} grown={}", e.node, e.host, e.pid, e.replaced_pid,
                       e.grown);
  }
  std::string operator()(const job_started& e) const {
    return fmt::format("nodes={} world_size={}", e.nodes, e.world_size);
  }
  std::string operator()(const step_trained& e) const { return fmt::format("step={} loss={:.4f}", e.step, e.loss); }
  std::string operator()(const failure_detected& e) const {
    return fmt::format("kind={} nodes={} ranks={} reason={}", to_string(e.kind), list(e.nodes), list(e.ranks),
                       e.reason);
  }
  std::string operator()(const recovery_chosen& e) const {
    return fmt::format("route={} epoch={} nodes={} reason={}", to_string(e.route), e.epoch, list(e.nodes), e.reason);
  }
  std::string operator()(const state_moved& e) const {
    return fmt::format("route={} epoch={} bytes={} seconds={:.3f} donors={} receivers={}", to_string(e.route), e.epoch,
                       e.bytes, e.seconds, list(e.donors), list(e.receivers));
  }
  std::string operator()(const training_resumed& e) const {
    return fmt::format(
        "route={} epoch={} after_step={} from={} ranks={} nodes={} replaced_pids={} seconds={:.3f} kind={}",
        to_string(e.route), e.epoch, e.after_step, e.from, list(e.ranks), list(e.nodes), list(e.replaced_pids),
        e.seconds, to_string(e.kind));
  }
  std::string operator()(const straggler_named& e) const {
    return fmt::format("rank={} node={} waiting_share={:.2f} others_waiting_share={:.2f}", e.rank, e.node,
                       e.waiting_share, e.others_waiting_share);
  }
  std::string operator()(const checkpoint_noted& e) const {
    return fmt::format("outcome={} rank={} step={} detail={}", to_string(e.outcome), e.rank, e.step, e.detail);
  }
  std::string operator()(const layout_changed& e) const {
    return fmt::format(
        "route={} nodes={} replicas_before={} replicas_after={} batch_size={} per_replica={} "
        "per_replica_key={}",
        to_string(e.route), list(e.nodes), e.replicas_before, e.replicas_after, e.batch_size, e.per_replica,
        e.per_replica_key);
  }
  std::string operator()(const attempt_ended& e) const {
    return fmt::format("exit_code={} kind={} nodes={} reason={}", e.exit_code, to_string(e.kind), list(e.nodes),
                       e.reason);
  }
  std::string operator()(const job_ended& e) const {
    return fmt::format("exit_code={} restarts={} counts={} reason={}", e.exit_code, e.restarts, e.counts, e.reason);
  }
};

}  // namespace

std::string_view event_name(const job_event_body& body) { return caf::visit(Name{}, body); }

std::string to_text(const job_event& event) {
  return fmt::format("{} {:.3f} attempt={} {} {}", event.seq, event.unix_seconds, event.attempt, event_name(event.body),
                     caf::visit(Fields{}, event.body));
}

double unix_now() { return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count(); }

JobEvents::JobEvents(std::size_t capacity) : capacity_(std::max<std::size_t>(capacity, 1)) {}

std::int64_t JobEvents::emit(int attempt, job_event_body body, double unix_seconds) {
  std::int64_t seq = 0;
  {
    std::lock_guard lock(mutex_);
    seq = next_seq_++;
    if (events_.size() == capacity_) events_.pop_front();
    events_.push_back({seq, unix_seconds > 0 ? unix_seconds : unix_now(), attempt, std::move(body)});
  }
  changed_.notify_all();
  return seq;
}

std::vector<job_event> JobEvents::since(std::int64_t after, std::size_t limit) const {
  std::lock_guard lock(mutex_);
  const auto first = std::upper_bound(events_.begin(), events_.end(), after,
                                      [](std::int64_t seq, const job_event& e) { return seq < e.seq; });
  const auto count = std::min<std::size_t>(limit, static_cast<std::size_t>(events_.end() - first));
  return {first, first + static_cast<std::ptrdiff_t>(count)};
}

bool JobEvents::wait_after(std::int64_t after, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  return changed_.wait_for(lock, timeout, [&] { return next_seq_ - 1 > after; });
}

std::int64_t JobEvents::last_seq() const {
  std::lock_guard lock(mutex_);
  return next_seq_ - 1;
}

void JobEvents::note_read(std::int64_t seq) const {
  {
    std::lock_guard lock(mutex_);
    read_up_to_ = std::max(read_up_to_, seq);
  }
  changed_.notify_all();
}

bool JobEvents::read_by_anyone() const {
  std::lock_guard lock(mutex_);
  return read_up_to_ >= 0;
}

bool JobEvents::wait_read(std::int64_t seq, std::chrono::milliseconds timeout) const {
  std::unique_lock lock(mutex_);
  if (read_up_to_ < 0) return true;
  return changed_.wait_for(lock, timeout, [&] { return read_up_to_ >= seq; });
}

}  // namespace troupe::actors
