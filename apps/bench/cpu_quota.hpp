#pragma once
// A process held to a share of one core, as a slower device would run it (`troupe bench pipeline
// --stage-speeds`): a control group of its own whose CPU bandwidth allows `share` of every 10 ms —
// cgroup v2's cpu.max where /sys/fs/cgroup is a cgroup2 file system, else cgroup v1's
// cpu.cfs_quota_us and cpu.cfs_period_us under /sys/fs/cgroup/cpu. The quota covers every thread
// of the processes that join it. The group is created by create() and removed by the destructor,
// once its processes have exited. Needs root, or a group delegated to the user.

#include <sys/types.h>

#include <string>

#include "compute/expected.hpp"

namespace troupe::apps {

class CpuQuota {
 public:
  // A group named `name` (unique on the host: the caller's pid is added) allowing `share` (0, 1]
  // of a core. An Error, one line naming the path, where neither hierarchy is mounted with a
  // CPU controller or it cannot be written.
  static Expected<CpuQuota> create(const std::string& name, double share);

  CpuQuota(CpuQuota&& other) noexcept;
  CpuQuota& operator=(CpuQuota&&) = delete;
  CpuQuota(const CpuQuota&) = delete;
  ~CpuQuota();

  // Moves process `pid`, all its threads, into the group.
  Status join(pid_t pid) const;
  // Lifts the quota (the group's processes run unlimited) or puts it back (a slowdown that starts
  // and ends while they run).
  Status hold(bool held) const;
  // "cgroup v2 cpu.max 5000 10000 (/sys/fs/cgroup/troupe-bench-1234)".
  const std::string& describe() const { return description_; }

 private:
  CpuQuota(std::string path, bool v2, long quota_us) : path_(std::move(path)), v2_(v2), quota_us_(quota_us) {}

  std::string path_;  // empty once moved from
  bool v2_ = false;
  long quota_us_ = 0;
  std::string description_;
};

}  // namespace troupe::apps
