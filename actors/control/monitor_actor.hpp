#pragma once
// The monitor actor: in the job process, beside the job supervisor, published on the control
// port for `troupe shell` (docs/shell.md). Every shell request carries the job's token; a wrong
// or missing token or an oversized line is refused, logged, and changes nothing.
//
// It watches the job through the job supervisor (a view every quarter second: nodes, heartbeats,
// each rank's recent steps) and keeps each rank's recent steps for status, top, loss and trace.
// Orders reach the workers through their node supervisors (control_msg) and are obeyed at step
// boundaries: pause, checkpoint and drain first agree on one boundary for every rank (hold, then
// act; monitor/step_control.hpp), kill worker makes one rank's worker throw at its next boundary,
// kill node sends SIGKILL to a node process on this machine. One actor per attempt: a restarted
// job has a new one on the same port, which tells the shell which attempt it is and why the last
// one ended. Programs (the drill) read the job's events through it (events_request_msg, with the
// token), whichever attempt answers.

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/job_events.hpp"

namespace troupe::actors {

class WebFeed;

struct MonitorPlan {
  std::string token;
  caf::actor job;  // this attempt's job supervisor
  long total_steps = 0;
  int world_size = 1;
  int dp = 1;  // the comm grid's data-parallel axis: replicas × context shards
  int pp = 1;
  int tp = 1;
  int cp = 1;                      // context shards: consecutive ranks of the dp axis (context.shards)
  std::string checkpoint_dir;      // empty: checkpoint and drain are refused
  std::vector<bool> node_is_local;  // by node index: kill node signals only processes of this machine
  bool replaces_lost_nodes = false;  // a lost node's process alone is started again (recovery_path.hpp)
  int attempt = 0;   // the job's attempts before this one: every restart of every node, whatever its reason
  int restarts = 0;  // the restarts that used fault.max_restarts' budget (recovery_counts.hpp)
  int max_restarts = 0;
  std::string restarted_after;      // why the previous attempt ended
  std::vector<std::string> left_out;  // host-file lines an earlier shrink left out ("h1 slots=1"): rejoin's
  std::chrono::milliseconds poll{250};
  // The job's events (job_events.hpp), which outlive the attempt: status lists its recoveries from
  // them, and `events` requests read them. Null: none (status lists no recovery).
  const JobEvents* events = nullptr;
  // The job's web page and TensorBoard job run (web_feed.hpp), given every view; null: none.
  WebFeed* web = nullptr;
};

// Longest command line a shell may send; a longer one is refused unread.
constexpr std::size_t max_shell_line = 4096;

caf::actor spawn_monitor(caf::actor_system& system, MonitorPlan plan);

}  // namespace troupe::actors
