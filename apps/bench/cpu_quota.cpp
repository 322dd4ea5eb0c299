#include "apps/bench/cpu_quota.hpp"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "compute/check.hpp"

namespace troupe::apps {
namespace {

constexpr long period_us = 10000;           // short, so a held process runs in slices of at most share × 10 ms
constexpr long cgroup2_magic = 0x63677270;  // CGROUP2_SUPER_MAGIC (linux/magic.h)
constexpr long cgroup1_magic = 0x27e0eb;    // CGROUP_SUPER_MAGIC

bool mounted_as(const char* path, long magic) {
  struct statfs fs {};
  return ::statfs(path, &fs) == 0 && static_cast<long>(fs.f_type) == magic;
}

Status write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.flush();
  if (!out) return Error{"cannot write '" + text + "' to " + path + ": " + std::strerror(errno)};
  return Status::success();
}

}  // namespace

Expected<CpuQuota> CpuQuota::create(const std::string& name, double share) {
  TROUPE_CHECK(share > 0 && share <= 1, "a CPU quota is a share of one core in (0, 1]");
  const bool v2 = mounted_as("/sys/fs/cgroup", cgroup2_magic);
  const std::string base = v2 ? "/sys/fs/cgroup" : "/sys/fs/cgroup/cpu";
  if (!v2 && !mounted_as(base.c_str(), cgroup1_magic))
    return Error{
        "no CPU quota: /sys/fs/cgroup is not cgroup v2 and /sys/fs/cgroup/cpu is not a cgroup v1 cpu "
        "hierarchy"};
  // cgroup v2 gives a child cpu.max only where the parent hands the cpu controller down.
  if (v2 && ::access((base + "/cgroup.subtree_control").c_str(), W_OK) == 0)
    (void)write_file(base + "/cgroup.subtree_control", "+cpu");
  const std::string path = base + "/troupe-" + name + "-" + std::to_string(::getpid());
  if (::mkdir(path.c_str(), 0755) != 0 && errno != EEXIST)
    return Error{"no CPU quota: cannot create " + path + ": " + std::strerror(errno)};
  const long quota_us = std::max(1000L, std::lround(share * period_us));
  CpuQuota quota(path, v2, quota_us);
  Status written = v2 ? Status::success() : write_file(path + "/cpu.cfs_period_us", std::to_string(period_us));
  if (written) written = quota.hold(true);
  if (!written) return Error{"no CPU quota: " + written.error().message};
  quota.description_ =
      v2 ? "cgroup v2 cpu.max " + std::to_string(quota_us) + " " + std::to_string(period_us) + " (" + path + ")"
         : "cgroup v1 cpu.cfs_quota_us " + std::to_string(quota_us) + " of cpu.cfs_period_us " +
               std::to_string(period_us) + " (" + path + ")";
  return quota;
}

CpuQuota::CpuQuota(CpuQuota&& other) noexcept
    : path_(std::move(other.path_)),
      v2_(other.v2_),
      quota_us_(other.quota_us_),
      description_(std::move(other.description_)) {
  other.path_.clear();
}

CpuQuota::~CpuQuota() {
  if (!path_.empty()) ::rmdir(path_.c_str());
}

Status CpuQuota::join(pid_t pid) const { return write_file(path_ + "/cgroup.procs", std::to_string(pid)); }

Status CpuQuota::hold(bool held) const {
  // Unlimited is "max" in cgroup v2's cpu.max and -1 in v1's cpu.cfs_quota_us.
  const std::string quota = held ? std::to_string(quota_us_) : v2_ ? "max" : "-1";
  return v2_ ? write_file(path_ + "/cpu.max", quota + " " + std::to_string(period_us))
             : write_file(path_ + "/cpu.cfs_quota_us", quota);
}

}  // namespace troupe::apps
