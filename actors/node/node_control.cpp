#include "actors/node/node_control.hpp"

#include "monitor/log.hpp"

namespace troupe::actors {

NodeControl::NodeControl(int first_rank, int slots) : first_rank_(first_rank) {
  for (int i = 0; i < slots; ++i) controls_.push_back(std::make_unique<monitor::StepControl>());
}

actors::control_reply_msg NodeControl::obey(const actors::control_msg& order) {
  actors::control_reply_msg reply;
  if (order.order == "hold") {
    for (auto& control : controls_) reply.boundaries.push_back(control->hold());
  } else if (order.order == "act") {
    monitor::BoundaryAction action = monitor::BoundaryAction::none;
    if (order.action == "checkpoint") action = monitor::BoundaryAction::checkpoint;
    else if (order.action == "pause") action = monitor::BoundaryAction::pause;
    else if (order.action == "checkpoint_and_hold")
      action = monitor::BoundaryAction::checkpoint_and_hold;
    else if (order.action != "none") reply.error = "unknown action '" + order.action + "'";
    // A bad action still releases the hold, as a cancel.
    for (auto& control : controls_) control->act(order.boundary, action);
  } else if (order.order == "resume") {
    for (auto& control : controls_) control->resume();
  } else if (order.order == "rescue") {
    for (auto& control : controls_) control->rescue();
  } else if (order.order == "fail") {
    const int slot = order.rank - first_rank_;
    if (slot < 0 || slot >= static_cast<int>(controls_.size()))
      reply.error = "rank " + std::to_string(order.rank) + " is not on this node";
    else
      controls_[static_cast<std::size_t>(slot)]->fail_next();
  } else if (order.order == "log") {
    if (Status set = monitor::set_log_level(order.action, order.subsystem); !set) reply.error = set.error().message;
  } else {
    reply.error = "unknown order '" + order.order + "'";
  }
  if (!reply.error.empty()) monitor::logger("monitor")->warn("control order refused: {}", reply.error);
  return reply;
}

void NodeControl::stop_all() {
  for (auto& control : controls_) control->stop();
}

}  // namespace troupe::actors
