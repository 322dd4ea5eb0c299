#pragma once
// The CPU backend's own threads for the work that is not a large GEMM (OpenBLAS threads those).
// A team of `size` threads runs one range of work split into `size` contiguous parts, the calling
// thread taking the first part, and returns when every part is done (fork-join, no queue).
//
// Part bounds are multiples of the caller's grain, so a vectorised loop sees the same element
// alignment in every part as over the whole range and each element is computed by the same
// instructions whatever the team's size: results do not depend on it (tests/compute pins this).

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace troupe::compute::cpu {

class ThreadTeam {
 public:
  using Part = std::function<void(std::int64_t begin, std::int64_t end)>;

  explicit ThreadTeam(int size);
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return static_cast<int>(helpers_.size()) + 1; }

  // Runs part(begin, end) over [0, n) split as above; one part runs inline when n is under two
  // grains. Not re-entrant: one run at a time per team. An exception in a part is rethrown here
  // after every part has ended.
  void run(std::int64_t n, std::int64_t grain, const Part& part);

 private:
  void serve(int index);
  void run_part(int index);

  std::vector<std::thread> helpers_;
  std::mutex mutex_;
  std::condition_variable wake_, finished_;
  std::uint64_t generation_ = 0;
  int running_ = 0;
  bool stopping_ = false;
  const Part* part_ = nullptr;
  std::int64_t n_ = 0, grain_ = 1;
  std::exception_ptr error_;
};

}  // namespace troupe::compute::cpu
