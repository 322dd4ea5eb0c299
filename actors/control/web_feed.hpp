#pragma once
// What the job process shows beyond the shell (docs/web.md): its web page and job-level /metrics
// (monitor/job_web.hpp) and, with monitor.tensorboard_dir, TensorBoard's `job` run, where the job's
// failures, recoveries, grows and checkpoints go as text. One feed for the whole job, owned by the
// control port; each attempt's monitor actor gives it the job supervisor's view as it comes (every
// quarter second), and the feed folds the job's typed events (job_events.hpp) that arrived since
// the last one: no log line is read.
//
// A rank's state on the page, first match wins (a lost or recovering rank's tile also says since
// when, from the event's time):
//   lost        a failure_detected named it (or its node) and no recovery was chosen yet
//   recovering  a recovery_chosen came after that, and no training_resumed yet
//   done        its node finished
//   straggling  a straggler_named named it within the last straggler_memory
//   waiting     its heartbeat says it waits for a message (the message is shown)
//   training    its heartbeat reports it, the job running
//   starting    otherwise (its node has not joined, or the job has not started)

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "actors/control/monitor_actor.hpp"
#include "actors/control/monitor_report.hpp"
#include "actors/job_events.hpp"
#include "actors/job_options.hpp"
#include "actors/local_messages.hpp"
#include "compute/expected.hpp"
#include "monitor/event_file.hpp"
#include "monitor/job_snapshot.hpp"
#include "monitor/job_web.hpp"

namespace troupe::actors {

// What the job's events say so far, folded one event at a time.
struct EventFold {
  static constexpr std::size_t max_timeline = 500;

  std::int64_t last_seq = 0;
  std::int64_t step = 0;
  double loss = 0;
  std::set<int> lost_ranks, lost_nodes;  // since the last failure, until training resumes
  struct Recovered {
    std::set<int> ranks, nodes;  // what a failure named, training resumed after
  };
  std::vector<Recovered> recovered;  // every recovery finished (a rank's count: those naming it or its node)
  bool recovering = false;           // a recovery was chosen for them
  double lost_unix_seconds = 0;      // when the first failure since the last resume was detected
  double recovering_unix_seconds = 0;  // when the newest recovery was chosen
  int straggler = -1;
  double straggler_unix_seconds = 0;
  double last_checkpoint_unix_seconds = 0;
  std::map<std::string, long> recoveries_by_path;
  std::vector<monitor::TimelineEntry> timeline;  // the newest max_timeline

  // Takes `event` in; returns whether it belongs on the timeline (and TensorBoard's job run).
  bool take(const job_event& event);
};

// The page's snapshot of the job as `view`, `history` and `fold` have it at `now_unix_seconds`.
monitor::JobSnapshot web_snapshot(const MonitorPlan& plan, const job_view_msg& view, const StepHistory& history,
                                  const EventFold& fold, double now_unix_seconds);

class WebFeed {
 public:
  static constexpr double straggler_memory_seconds = 30;

  // The page on monitor.web_port at monitor.control_bind (none with -1), behind `token`; the
  // event file in monitor.tensorboard_dir/job (none with ""). Logs the page's address. An Error
  // names the key when the port cannot be listened on or the folder not written.
  static Expected<std::unique_ptr<WebFeed>> open(const MonitorOptions& options, const std::string& token,
                                                 const JobEvents* events);

  // An attempt's monitor saw `view`: fold the new events, publish the page's snapshot.
  void update(const MonitorPlan& plan, const job_view_msg& view, const StepHistory& history);
  int port() const { return web_ ? web_->port() : -1; }

 private:
  WebFeed(const JobEvents* events) : events_(events) {}

  const JobEvents* events_;
  std::mutex mutex_;  // an ended attempt's monitor may still be answering as the next one starts
  EventFold fold_;
  std::unique_ptr<monitor::JobWeb> web_;
  std::optional<monitor::EventFile> board_;
};

}  // namespace troupe::actors
