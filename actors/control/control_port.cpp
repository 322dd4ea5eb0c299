#include "actors/control/control_port.hpp"

#include <algorithm>
#include <filesystem>

#include <caf/io/all.hpp>

#include "actors/local_messages.hpp"
#include "actors/messages.hpp"
#include "actors/control/monitor_actor.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {

ControlPort::ControlPort(const MonitorOptions& options, std::string token, const JobEvents* events)
    : options_(options),
      bind_(options.control_bind),
      port_(options.control_port),
      token_(std::move(token)),
      events_(events) {}

Status ControlPort::open(caf::actor_system& system, caf::actor job, const JobConfig& config, int world_size,
                         std::vector<bool> node_is_local, bool replaces_lost_nodes, int attempt, int restarts) {
  if (!web_) {
    auto web = WebFeed::open(options_, token_, events_);
    if (!web) return web.error();
    web_ = std::move(*web);
  }
  actors::MonitorPlan monitor_plan;
  monitor_plan.token = token_;
  monitor_plan.job = std::move(job);
  monitor_plan.total_steps = config.train.steps;
  monitor_plan.world_size = world_size;
  monitor_plan.pp = config.pipeline.stages;
  monitor_plan.tp = config.tensor.shards;
  monitor_plan.dp = world_size / (config.pipeline.stages * config.tensor.shards);
  monitor_plan.cp = config.context.shards;
  monitor_plan.checkpoint_dir =
      config.checkpoint.dir.empty() ? std::string() : std::filesystem::absolute(config.checkpoint.dir).string();
  monitor_plan.replaces_lost_nodes = replaces_lost_nodes;
  monitor_plan.node_is_local = std::move(node_is_local);
  monitor_plan.attempt = attempt;
  monitor_plan.restarts = restarts;
  monitor_plan.max_restarts = config.fault.max_restarts;
  monitor_plan.restarted_after = last_reason_;
  monitor_plan.left_out = left_out_;
  monitor_plan.events = events_;
  monitor_plan.web = web_.get();
  auto monitor = actors::spawn_monitor(system, std::move(monitor_plan));
  // Only an opened port takes orders for this attempt's monitor (forget_monitor() ends that).
  auto opened = [this, monitor] {
    std::lock_guard lock(monitor_mutex_);
    monitor_ = monitor;
    return Status::success();
  };
  auto internal = system.middleman().publish(monitor, 0, "127.0.0.1");
  if (!internal) {
    caf::anon_send_exit(monitor, caf::exit_reason::user_shutdown);
    return Error{"cannot publish the monitor actor on 127.0.0.1: " + to_string(internal.error())};
  }
  if (guard_) {
    guard_->retarget(*internal);
    return opened();
  }
  auto log = monitor::logger("monitor");
  auto guard = actors::FrameGuard::start({bind_, static_cast<std::uint16_t>(port_), *internal, 1u << 20, 64,
                                          [log](const std::string& line) { log->warn("control port: {}", line); }});
  if (!guard)
    return Error{"monitor.control_port: cannot listen on " + bind_ + ":" + std::to_string(port_) + ": " +
                 guard.error().message};
  guard_ = std::move(*guard);
  port_ = guard_->port();
  auto file = ControlTokenFile::write(default_control_token_path(port_), token_);
  if (!file) return file.error();
  file_ = std::move(*file);
  if (const int stale = file_->stale_removed(); stale > 0)
    monitor::logger("job")->info("removed {} token file(s) of killed jobs from {}", stale,
                                 file_->path().parent_path().string());
  monitor::logger("job")->info("monitor: troupe shell {}:{} (the job's token is in {})", bind_, port_,
                               file_->path().string());
  return opened();
}

void ControlPort::forget_monitor() {
  std::lock_guard lock(monitor_mutex_);
  if (monitor_) caf::anon_send_exit(monitor_, caf::exit_reason::user_shutdown);
  monitor_ = nullptr;
}

void ControlPort::grew(int world_size, std::vector<bool> node_is_local, std::vector<std::string> left_out) {
  std::lock_guard lock(monitor_mutex_);
  left_out_ = left_out;
  if (monitor_)
    caf::anon_send(monitor_, grown_atom_v, grown_msg{world_size, std::move(node_is_local), std::move(left_out)});
}

void ControlPort::order(const std::string& command) {
  std::lock_guard lock(monitor_mutex_);
  if (monitor_) caf::anon_send(monitor_, shell_atom_v, shell_request_msg{token_, command});
}

}  // namespace troupe::actors
