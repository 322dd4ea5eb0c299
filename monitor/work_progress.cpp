#include "monitor/work_progress.hpp"

#include <utility>

namespace troupe::monitor {

WorkProgress::WorkProgress(std::function<std::string()> oldest_receive) : oldest_receive_(std::move(oldest_receive)) {}

void WorkProgress::begin(std::string activity) {
  std::lock_guard lock(mutex_);
  activity_ = std::move(activity);
}

void WorkProgress::step_done(std::int64_t steps_done) {
  std::lock_guard lock(mutex_);
  steps_done_ = steps_done;
  ++progress_;
  last_progress_ = std::chrono::steady_clock::now();
}

void WorkProgress::step_done(const StepRecord& step) {
  step_done(step.step);
  std::lock_guard lock(mutex_);
  if (recent_steps_.size() == kept_steps) recent_steps_.erase(recent_steps_.begin());
  recent_steps_.push_back(step);
}

void WorkProgress::resumed_at(std::int64_t steps_done) {
  std::lock_guard lock(mutex_);
  steps_done_ = steps_done;
}

void WorkProgress::validation_done(std::int64_t after_step, double loss) {
  std::lock_guard lock(mutex_);
  ++progress_;
  last_progress_ = std::chrono::steady_clock::now();
  for (StepRecord& record : recent_steps_)
    if (record.step == after_step) {
      record.validated = true;
      record.val_loss = loss;
    }
}

WorkProgress::Wait WorkProgress::wait_for(std::string what) {
  std::lock_guard lock(mutex_);
  waiting_for_ = std::move(what);
  waiting_since_ = std::chrono::steady_clock::now();
  return Wait(*this);
}

WorkProgress::Wait::~Wait() {
  std::lock_guard lock(owner_.mutex_);
  owner_.waiting_for_.clear();
}

ProgressSnapshot WorkProgress::snapshot() const {
  ProgressSnapshot s;
  {
    std::lock_guard lock(mutex_);
    s.steps_done = steps_done_;
    s.progress = progress_;
    s.idle_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - last_progress_).count();
    s.activity = activity_;
    s.recent_steps = recent_steps_;
    s.waiting_for = waiting_for_;
    if (!waiting_for_.empty())
      s.waiting_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - waiting_since_).count();
  }
  if (!s.waiting_for.empty() && oldest_receive_) {
    if (std::string receive = oldest_receive_(); !receive.empty()) s.waiting_for += "; oldest receive: " + receive;
  }
  return s;
}

void WorkProgress::note(NoticeKind kind, std::int64_t step, std::string detail) {
  const double now = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  std::lock_guard lock(mutex_);
  notices_.push_back({kind, step, now, std::move(detail)});
}

std::vector<WorkNotice> WorkProgress::take_notices() {
  std::lock_guard lock(mutex_);
  return std::exchange(notices_, {});
}

}  // namespace troupe::monitor
