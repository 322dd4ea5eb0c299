#include "comm/bucket_sums.hpp"

namespace troupe::comm {

void BucketSums::start(compute::Tensor bucket) {
  {
    std::lock_guard lock(mutex_);
    ++in_flight_;
  }
  comm_.post_all_reduce(std::move(bucket), [this](Status status) {
    std::lock_guard lock(mutex_);
    if (!status && first_failure_) first_failure_ = status;
    if (--in_flight_ == 0) done_.notify_all();
  });
}

Status BucketSums::wait() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return in_flight_ == 0; });
  Status result = first_failure_;
  first_failure_ = Status::success();
  return result;
}

}  // namespace troupe::comm
