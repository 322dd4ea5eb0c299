#pragma once
// The launcher of `troupe launch`: starts one child per node process (local hosts by
// posix_spawn, others through the launcher template), forwards each child's stdout and stderr
// line by line with a prefix as pdsh and DeepSpeed do (`[node 1 host] text`), notices a child's
// exit at once, and turns a failure, a signal (SIGINT, SIGTERM, or SIGHUP when the terminal goes
// away) or stop_all() into an orderly stop: SIGTERM to every child, SIGKILL to those still there
// after the grace period.
//
// Everything runs on one Boost.Asio event loop on the thread that calls run(); nothing else
// progresses it. Sinks and callbacks are called on that thread. stop_all() may come from any
// thread (the job supervisor's).
//
//   idle ──run()──► checking ──every check exited 0──► running ──every node exited 0──► done
//    │                 │                                 ▲  │                             ▲
//    └──run(), no remote host or no pre-flight───────────┘  │ a node failed and           │
//                      │                                    │ hold_after_failure > 0      │
//                      │                                    ▼                             │
//                      │                                 holding ──every node exited──────┤
//                      │                                    │ hold over, stop_all(),      │
//                      │                                    │ SIGINT/TERM/HUP             │
//                      │ a check failed or timed out,       │ a node failed (no hold),    │
//                      │ SIGINT/TERM/HUP, stop_all()        │ SIGINT/TERM/HUP, stop_all() │
//                      ▼                                    │                             │
//                   stopping ◄──────────────────────────────┘                             │
//                      │  SIGTERM to every live child's process group                     │
//                      ├──every child reaped──────────────────────────────────────────────┤
//                      │ grace period over, or a second signal                            │
//                      ▼                                                                  │
//                   killing ──every child reaped──────────────────────────────────────────┘
//                         SIGKILL to every live child's process group
//
// checking runs the launcher template with the command `true` once per remote host, under the
// pre-flight timeout. done is where run() returns the JobResult.
//
// A local node runs with a shared-memory folder of its own, removed once it has exited, so one
// that was killed leaves nothing in /dev/shm (node_shared_memory.hpp).
//
// replace_node() starts one node's process again while the others run (running, or holding ─►
// running), for the job supervisor's in-place recovery of a lost or silent node; move_node() starts
// it on another host (a spare line) when its own host is unreachable; add_node() starts a node the
// job did not run yet (an in-place grow).
//
// A node that exits 0 while others run is not a failure; the job is a success when every node
// exited 0 without a stop. Exits during holding, stopping and killing are expected and only
// recorded; the JobResult is the first failure's.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "apps/launch/exit_status.hpp"
#include "apps/launch/launch_template.hpp"
#include "apps/launch/process_spec.hpp"

namespace troupe::launch {

// How a job ended; exit_code() is the launcher's exit code for it (apps/exit_codes.hpp).
enum class JobEnd {
  success,       // 0: every node process exited with code 0
  node_failed,   // 1: a node exited non-zero or was killed by a signal the launcher did not send
  start_failed,  // 3: a node could not start: pre-flight failed or timed out, or spawning failed
  interrupted,   // 130: SIGINT (Ctrl-C) to the launcher
  terminated,    // 143: SIGTERM to the launcher
  hung_up,       // 129: SIGHUP to the launcher (its terminal went away)
};
int exit_code(JobEnd end);

struct NodeExit {
  int node_index = 0;
  std::string host;
  ExitStatus status;
  bool started_again = false;  // the process replace_node() started in place of a lost one
  int pid = 0;                 // the process that exited
};

enum class OutputStream { out, err };
// Receives each forwarded line, prefix included and newline excluded, whole.
using LineSink = std::function<void(OutputStream stream, std::string_view line)>;
// Writes each line with its newline to our stdout or stderr in one write().
LineSink standard_streams_sink();

struct LauncherOptions {
  LaunchTemplate remote = LaunchTemplate::ssh();       // for nodes whose host is not this machine
  std::chrono::milliseconds preflight_timeout{10000};  // the template runs `true` per remote host first; 0: skip
  std::chrono::milliseconds grace{10000};              // from SIGTERM to SIGKILL
  bool handle_signals = true;                          // SIGINT/SIGTERM/SIGHUP stop the job while run() runs
  LineSink sink = standard_streams_sink();
  std::function<void(const NodeExit&)> on_node_exit;  // every node exit, as soon as it is seen
  // Asked when a node fails while running: how long to leave the others alone before stopping
  // them (holding), so they can finish what the job asked of them after the failure (a rescue
  // snapshot); stop_all() ends the hold at once. Empty or 0: stop at once.
  std::function<std::chrono::milliseconds()> hold_after_failure;
  // Once, on the launcher's thread, when a signal (SIGINT, SIGTERM, SIGHUP) begins the job's stop,
  // before any node is signalled; with the line that says why.
  std::function<void(const std::string&)> on_signal_stop;
};

struct JobResult {
  JobEnd end = JobEnd::success;
  std::string message;          // one line saying why the job stopped; empty on success
  std::vector<NodeExit> exits;  // in the order the nodes ended; a node that never started has none
};

class NodeLauncher {
 public:
  NodeLauncher(std::vector<NodeProcessSpec> nodes, LauncherOptions options);
  ~NodeLauncher();
  NodeLauncher(const NodeLauncher&) = delete;
  NodeLauncher& operator=(const NodeLauncher&) = delete;

  // Runs the job on the calling thread until every child has ended. Once per launcher.
  JobResult run();
  // Any thread: stops the job in order (see the state machine); reason and message become the
  // JobResult's unless the job is already stopping. Called before run(), it takes effect as soon
  // as run() has started the children.
  void stop_all(JobEnd reason, std::string message);
  // Any thread, while the job runs or holds after a node's failure: starts node `node_index`'s
  // process again from its spec, for an in-place recovery. Its old process, if still there, gets
  // SIGKILL (and SIGCONT, in case it was stopped); that exit is expected, not a failure. A hold
  // that the old process's exit began ends: the job runs on (running). Ignored once stopping.
  // `env` is set on top of the node's spec (a variable of the same name replaced).
  void replace_node(int node_index, Environment env);
  // Any thread, as replace_node(), but on `host` (this machine when `local`), which the node keeps
  // from then on. Its old process is left alone: its host is unreachable, so what runs it there
  // is out of reach (the process stops by itself once it hears nothing from the job), and the
  // launcher-command process that started it ends when its connection does, or with the job. Its
  // exit is expected, not a failure.
  void move_node(int node_index, std::string host, bool local, Environment env);
  // Any thread, while the job runs: starts a node that is not in the plan yet, which is part of it
  // from then on (the job grows in place). Its exit is reported as a started-again one's, so the
  // job supervisor hears of a process that ends before it joins. Ignored unless running.
  void add_node(NodeProcessSpec node);
  // Any thread: what a later replace_node() or move_node() starts node `node_index` with: `argv`,
  // and `env` on top of its variables (the job grew in place: its configuration and world size).
  // Its process now runs on.
  void update_node(int node_index, std::vector<std::string> argv, Environment env);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::launch
