#include "actors/process_logs.hpp"

#include <spdlog/fmt/fmt.h>

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

ProcessLogs::ProcessLogs(const JobConfig& config, const std::string& job, int node, int rank, const std::string& role,
                         int ranks)
    : path_(log_file_path(config, job, node)), format_(config.monitor.log_format), ranks_(ranks) {
  monitor::set_log_job(job);
  monitor::set_identity(rank, role);
  // resolve() has checked the spec.
  TROUPE_CHECK(monitor::set_log_levels(config.monitor.log_level).ok());
}

Status ProcessLogs::open_file() const {
  if (Status opened = monitor::log_to_file(path_.string(), format_); !opened)
    return Error{"monitor.log_dir: " + opened.error().message};
  monitor::set_ranks_in_process(ranks_);
  if (!path_.empty())
    monitor::logger("monitor")->info(
        "logs to {} ({}){}", path_.string(), monitor::log_format_name(format_),
        monitor::rank_details_on_console()
            ? ""
            : fmt::format("; with {} ranks in this process, each rank's lines about its memory, the peers it "
                          "reaches and its in-place recoveries are written there only",
                          ranks_));
  return Status::success();
}

}  // namespace troupe::actors
