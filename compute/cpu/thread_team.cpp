#include "compute/cpu/thread_team.hpp"

#include <algorithm>
#include <string>
#include <utility>

#include "compute/check.hpp"

namespace troupe::compute::cpu {

ThreadTeam::ThreadTeam(int size) {
  TROUPE_CHECK(size >= 1, "a thread team needs at least one thread, got " + std::to_string(size));
  helpers_.reserve(static_cast<std::size_t>(size - 1));
  for (int i = 1; i < size; ++i) helpers_.emplace_back([this, i] { serve(i); });
}

ThreadTeam::~ThreadTeam() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (auto& t : helpers_) t.join();
}

void ThreadTeam::run_part(int index) {
  const std::int64_t chunks = (n_ + grain_ - 1) / grain_;
  const std::int64_t per_part = (chunks + size() - 1) / size();
  const std::int64_t begin = std::min(n_, index * per_part * grain_);
  const std::int64_t end = std::min(n_, (index + 1) * per_part * grain_);
  if (begin >= end) return;
  try {
    (*part_)(begin, end);
  } catch (...) {
    std::lock_guard lock(mutex_);
    if (!error_) error_ = std::current_exception();
  }
}

void ThreadTeam::serve(int index) {
  std::uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      wake_.wait(lock, [&] { return stopping_ || generation_ != seen; });
      if (stopping_) return;
      seen = generation_;
    }
    run_part(index);
    std::lock_guard lock(mutex_);
    if (--running_ == 0) finished_.notify_one();
  }
}

void ThreadTeam::run(std::int64_t n, std::int64_t grain, const Part& part) {
  TROUPE_CHECK(grain >= 1, "a thread team's grain must be positive, got " + std::to_string(grain));
  if (n <= 0) return;
  if (helpers_.empty() || n < 2 * grain) {
    part(0, n);
    return;
  }
  {
    std::lock_guard lock(mutex_);
    TROUPE_CHECK(running_ == 0, "a thread team runs one range at a time");
    part_ = &part;
    n_ = n;
    grain_ = grain;
    error_ = nullptr;
    running_ = static_cast<int>(helpers_.size());
    ++generation_;
  }
  wake_.notify_all();
  run_part(0);
  std::unique_lock lock(mutex_);
  finished_.wait(lock, [&] { return running_ == 0; });
  part_ = nullptr;
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
}

}  // namespace troupe::compute::cpu
