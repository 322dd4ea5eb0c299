#pragma once
// A troupe job run as a subprocess, for failure drills: the drill reads the job's typed events from
// its control port, injects a fault, and times what follows. The job runs in its own process group
// so the drill can kill all of it at once; its stdout and stderr go to one pipe (and to a log file)
// and every line is kept with the time it arrived, for people and for tests that wait on a line.

#include <sys/types.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::apps {

class WatchedRun {
 public:
  using Clock = std::chrono::steady_clock;
  struct Line {
    Clock::time_point at;
    std::string text;
  };

  // Starts argv (argv[0] a path) with `extra_env` (NAME=value) added to ours, its output copied
  // to `log_path`.
  static Expected<std::unique_ptr<WatchedRun>> start(const std::vector<std::string>& argv,
                                                     const std::vector<std::string>& extra_env,
                                                     const std::string& log_path);
  ~WatchedRun();
  WatchedRun(const WatchedRun&) = delete;
  WatchedRun& operator=(const WatchedRun&) = delete;

  pid_t pid() const { return pid_; }
  using LineMatch = std::function<bool(const std::string& line)>;
  // The first line from index `from` on that `matches`, waiting up to `timeout`; nullopt if the
  // output ends or the time runs out first. `index` (when given) receives the line's position.
  std::optional<Line> wait_for_line(const LineMatch& matches, std::chrono::milliseconds timeout, std::size_t from = 0,
                                    std::size_t* index = nullptr);
  std::vector<Line> lines() const;
  // Waits for the process to exit: its exit code (128 + signal when killed), nullopt on timeout.
  // Any thread.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  // Every process started from the job, at any depth (node processes run in process groups of
  // their own).
  std::vector<pid_t> descendants() const;
  // SIGKILL to the job and every descendant.
  void kill_all();

 private:
  WatchedRun() = default;
  void read_output(int fd, std::string log_path);

  pid_t pid_ = -1;
  std::mutex exit_mutex_;  // the exit is reaped and recorded once, whichever thread waits
  std::optional<int> exit_code_;
  std::thread reader_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<Line> lines_;
  bool output_ended_ = false;
};

}  // namespace troupe::apps
