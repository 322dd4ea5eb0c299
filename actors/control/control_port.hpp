#pragma once
// The job's control port (docs/shell.md): monitor.control_port (0: any free port) at
// monitor.control_bind, open for the whole job. A frame guard (actors/control/frame_guard.hpp) listens
// there and passes checked frames on to where this attempt's monitor actor is published on
// loopback; so a shell finds a restarted job where it was and is told which attempt it now talks
// to and why. The first attempt writes the token file and prints the shell command.

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include <caf/all.hpp>

#include "actors/control/control_token.hpp"
#include "actors/control/frame_guard.hpp"
#include "actors/control/web_feed.hpp"
#include "actors/job_events.hpp"
#include "actors/job_options.hpp"
#include "compute/expected.hpp"

namespace troupe::actors {

class ControlPort {
 public:
  // `events`: the job's events, which every attempt's monitor reads (null: none); it outlives the port.
  ControlPort(const MonitorOptions& options, std::string token, const JobEvents* events = nullptr);

  // Spawns this attempt's monitor actor beside the job supervisor `job` and publishes it; an
  // Error naming the address when it cannot listen there. The first call also opens the job's web
  // page and TensorBoard job run (web_feed.hpp), as monitor.web_port and monitor.tensorboard_dir say. node_is_local has
  // one entry per node (by node index): whether that node process runs on this machine; replaces_lost_nodes: a lost
  // node's process alone is started again (supervision/recovery_path.hpp decided it).
  // `attempt`: the job's attempts before this one; `restarts`: those that used fault.max_restarts.
  Status open(caf::actor_system& system, caf::actor job, const JobConfig& config, int world_size,
              std::vector<bool> node_is_local, bool replaces_lost_nodes, int attempt, int restarts);
  // The attempt ended; the next attempt's monitor says so.
  void attempt_ended(const std::string& reason) { last_reason_ = reason; }
  // The host-file lines the next attempt runs without (an earlier shrink), for the shell's rejoin.
  void set_left_out(std::vector<std::string> lines) { left_out_ = std::move(lines); }
  // Gives this attempt's monitor `command` as a shell would, from launch itself on any thread; the
  // monitor logs it and its answer goes nowhere. Nothing before the first attempt's monitor is up.
  void order(const std::string& command);
  // The job grew in place to `world_size` ranks on nodes `node_is_local` (by node index, as open()
  // takes them), with `left_out` still left out: this attempt's monitor and the next take it so.
  void grew(int world_size, std::vector<bool> node_is_local, std::vector<std::string> left_out);
  // The attempt's actor system is about to end: its monitor goes, and no order goes to it any more.
  void forget_monitor();

 private:
  MonitorOptions options_;
  std::string bind_;
  int port_ = 0;
  std::string token_;
  std::unique_ptr<actors::FrameGuard> guard_;
  std::string last_reason_;
  std::vector<std::string> left_out_;
  std::mutex monitor_mutex_;
  caf::actor monitor_;  // this attempt's
  std::unique_ptr<ControlTokenFile> file_;
  const JobEvents* events_ = nullptr;
  std::unique_ptr<WebFeed> web_;  // opened with the first attempt's monitor, kept for the whole job
};

}  // namespace troupe::actors
