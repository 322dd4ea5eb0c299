#pragma once
// A node process's side of the shell's orders (control_msg from the job's monitor actor): one
// StepControl per slot, which the slot's training loop obeys at its step boundaries, and the
// process's log levels.

#include <memory>
#include <vector>

#include "actors/messages.hpp"
#include "monitor/step_control.hpp"

namespace troupe::actors {

class NodeControl {
 public:
  NodeControl(int first_rank, int slots);

  monitor::StepControl& slot(int slot) { return *controls_.at(static_cast<std::size_t>(slot)); }
  // Obeys `order` at once (hold answers with each slot's boundary); an unknown order, rank,
  // action, level or subsystem is the reply's error and changes nothing.
  actors::control_reply_msg obey(const actors::control_msg& order);
  // Ends every wait at a boundary: the node is stopping.
  void stop_all();

 private:
  int first_rank_;
  std::vector<std::unique_ptr<monitor::StepControl>> controls_;
};

}  // namespace troupe::actors
