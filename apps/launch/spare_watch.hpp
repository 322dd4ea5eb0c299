#pragma once
// Elastic grow onto a new spare line: while an attempt runs without some of the host file's nodes
// (an earlier shrink), the host file is read again every `period`. A spare line that was not in it
// before, with slots for one of the nodes left out, is where that node can come back: `grow` is
// called (launch orders the job's rejoin, as the shell's `rejoin` does) and called again every
// `retry` until the watch stops, in case the job could not take the order yet. A file that does
// not parse (half written) is read again at the next period.

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "apps/launch/host_file.hpp"

namespace troupe::launch {

class SpareWatch {
 public:
  struct Options {
    std::string host_file;
    std::vector<HostEntry> known_spares;  // the spare lines the job already knows of
    std::vector<int> left_out_slots;      // the slots of each node left out
    std::function<void(const std::vector<HostEntry>& found)> grow;
    std::chrono::milliseconds period{1000};
    std::chrono::milliseconds retry{5000};
  };

  explicit SpareWatch(Options options);
  ~SpareWatch();
  SpareWatch(const SpareWatch&) = delete;
  SpareWatch& operator=(const SpareWatch&) = delete;

  // Watches on a thread of its own while there is a host file and a node left out; otherwise
  // does nothing.
  void start();
  // Stops watching (waits for the thread).
  void stop();
  // The new spare lines seen at the last read (in file order), each with slots for a left-out node.
  std::vector<HostEntry> found();

 private:
  void watch();
  // The spare lines of `file` beyond the known ones that fit a left-out node.
  std::vector<HostEntry> new_spares(const HostFile& file) const;

  Options options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<HostEntry> found_;
  std::thread thread_;
};

}  // namespace troupe::launch
