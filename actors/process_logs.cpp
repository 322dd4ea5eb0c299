#include "actors/process_logs.hpp"

#include "compute/check.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {

std::filesystem::path log_file_path(const JobConfig& config, const std::string& job, int node) {
  const std::string& dir = config.monitor.log_dir;
  if (dir.empty()) return {};
  std::filesystem::path base = dir;
  if (dir == "auto")
    base = config.checkpoint.dir.empty() ? std::filesystem::path("troupe-logs")
                                         : std::filesystem::path(config.checkpoint.dir) / "logs";
  return base / job / ("node-" + std::to_string(node) + ".log");
}

ProcessLogs::ProcessLogs(const JobConfig& config, const std::string& job, int node, int rank, const std::string& role)
    : path_(log_file_path(config, job, node)), format_(config.monitor.log_format) {
  monitor::set_log_job(job);
  monitor::set_identity(rank, role);
  // resolve() has checked the spec.
  TROUPE_CHECK(monitor::set_log_levels(config.monitor.log_level).ok());
}

Status ProcessLogs::open_file() const {
  if (Status opened = monitor::log_to_file(path_.string(), format_); !opened)
    return Error{"monitor.log_dir: " + opened.error().message};
  if (!path_.empty())
    monitor::logger("monitor")->info("logs to {} ({})", path_.string(), monitor::log_format_name(format_));
  return Status::success();
}

}  // namespace troupe::actors
