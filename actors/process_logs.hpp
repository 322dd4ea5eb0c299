#pragma once
// The logs of one troupe process (docs/logging.md): every line carries the job label, the rank
// and the role; lines go to the console and to the process's own file, text or JSON lines, at the
// levels monitor.log_level sets per subsystem.

#include <filesystem>
#include <string>

#include "actors/job_options.hpp"
#include "compute/expected.hpp"

namespace troupe::actors {

// <monitor.log_dir>/<job>/node-<node>.log, where log_dir "auto" is <checkpoint.dir>/logs, or
// troupe-logs without a checkpoint.dir; empty when log_dir is "" (no file).
std::filesystem::path log_file_path(const JobConfig& config, const std::string& job, int node);

class ProcessLogs {
 public:
  // Sets the identity every line carries and the levels, from the process's first line on; the
  // process hosts `ranks` ranks (monitor::set_ranks_in_process).
  ProcessLogs(const JobConfig& config, const std::string& job, int node, int rank, const std::string& role,
              int ranks = 1);
  // Once start-up has passed its input checks (a rejected start leaves no file behind): opens the
  // file, appended to so a restarted node goes on in the same one, writes the lines logged so far
  // into it and logs "logs to PATH (FORMAT)" (subsystem monitor), saying so where the ranks' detail
  // lines go there only (monitor::rank_detail_logger). An Error naming monitor.log_dir when the
  // file cannot be opened.
  Status open_file() const;

 private:
  std::filesystem::path path_;
  monitor::LogFormat format_;
  int ranks_;
};

}  // namespace troupe::actors
