#pragma once
// The job's control port (docs/shell.md): monitor.control_port (0: any free port) at
// monitor.control_bind, open for the whole job. A frame guard (actors/frame_guard.hpp) listens
// there and passes checked frames on to where this attempt's monitor actor is published on
// loopback; so a shell finds a restarted job where it was and is told which attempt it now talks
// to and why. The first attempt writes the token file and prints the shell command.

#include <memory>
#include <string>

#include <caf/all.hpp>

#include "actors/frame_guard.hpp"
#include "apps/job_config.hpp"
#include "apps/launch/rank_plan.hpp"
#include "apps/token_file.hpp"
#include "compute/expected.hpp"

namespace troupe::apps {

class ControlPort {
 public:
  ControlPort(const MonitorOptions& options, std::string token);

  // Spawns this attempt's monitor actor beside the job supervisor `job` and publishes it; an
  // Error naming the address when it cannot listen there.
  Status open(caf::actor_system& system, caf::actor job, const JobConfig& config, const launch::RankPlan& plan,
              int restarts);
  // The attempt ended; the next attempt's monitor says so.
  void attempt_ended(const std::string& reason) { last_reason_ = reason; }

 private:
  std::string bind_;
  int port_ = 0;
  std::string token_;
  std::unique_ptr<actors::FrameGuard> guard_;
  std::string last_reason_;
  std::unique_ptr<TokenFile> file_;
};

}  // namespace troupe::apps
