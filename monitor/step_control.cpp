#include "monitor/step_control.hpp"

namespace troupe::monitor {

BoundaryOrder StepControl::at_boundary(std::int64_t steps_done, WorkProgress& progress) {
  std::unique_lock lock(mutex_);
  boundary_ = steps_done;
  at_boundary_ = true;
  for (std::string shown;;) {
    BoundaryOrder order;
    if (stop_) order.stop = true;
    if (fail_) order.fail = true;
    if (rescue_) order.rescue = true;
    if (target_ == steps_done) {
      if (action_ == BoundaryAction::pause) paused_ = true;
      if (action_ == BoundaryAction::checkpoint || action_ == BoundaryAction::checkpoint_and_hold)
        order.checkpoint = true;
      if (action_ == BoundaryAction::checkpoint_and_hold) held_ = true;
      target_ = -1;
      action_ = BoundaryAction::none;
    }
    if (order.stop || order.fail || order.rescue || order.checkpoint || (!held_ && !paused_)) {
      fail_ = false;
      at_boundary_ = order.checkpoint;
      return order;
    }
    if (std::string now = (paused_ ? "paused after step " : "held after step ") + std::to_string(steps_done);
        now != shown) {
      progress.begin(now);
      shown = std::move(now);
    }
    changed_.wait(lock);
  }
}

void StepControl::finished() {
  std::lock_guard lock(mutex_);
  finished_ = true;
}

void StepControl::reopen() {
  std::lock_guard lock(mutex_);
  finished_ = false;
}

std::int64_t StepControl::hold() {
  std::lock_guard lock(mutex_);
  if (finished_) return finished_boundary;
  held_ = true;
  if (boundary_ == not_started) return not_started;
  return at_boundary_ ? boundary_ : boundary_ + 1;
}

void StepControl::act(std::int64_t boundary, BoundaryAction action) {
  {
    std::lock_guard lock(mutex_);
    held_ = false;
    target_ = action == BoundaryAction::none ? -1 : boundary;
    action_ = action;
  }
  changed_.notify_all();
}

void StepControl::resume() {
  {
    std::lock_guard lock(mutex_);
    paused_ = false;
    if (action_ == BoundaryAction::pause) {
      target_ = -1;
      action_ = BoundaryAction::none;
    }
  }
  changed_.notify_all();
}

void StepControl::fail_next() {
  {
    std::lock_guard lock(mutex_);
    fail_ = true;
  }
  changed_.notify_all();
}

void StepControl::rescue() {
  {
    std::lock_guard lock(mutex_);
    rescue_ = true;
  }
  changed_.notify_all();
}

void StepControl::stop() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  changed_.notify_all();
}

}  // namespace troupe::monitor
