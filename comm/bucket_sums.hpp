#pragma once
// Gradient buckets summed while backward runs: start() posts an all-reduce of one bucket and
// returns at once (the engine's progress thread does the work); wait() blocks until every
// started bucket is done and reports the first failure. Every rank must start the same buckets
// in the same order, as with any collective on one Communicator.

#include <condition_variable>
#include <mutex>

#include "comm/collectives.hpp"

namespace troupe::comm {

class BucketSums {
 public:
  explicit BucketSums(Communicator& comm) : comm_(comm) {}

  void start(compute::Tensor bucket);
  Status wait();

 private:
  Communicator& comm_;
  std::mutex mutex_;
  std::condition_variable done_;
  int in_flight_ = 0;
  Status first_failure_;
};

}  // namespace troupe::comm
