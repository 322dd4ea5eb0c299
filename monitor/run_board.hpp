#pragma once
// What one rank's run shows in TensorBoard (docs/web.md lists the tags): every rank writes its
// step time to DIR/rank-R/, so TensorBoard draws one line per rank on one chart; the reporting
// rank (rank 0) adds the training curves and the validation loss; a rank that recovers writes what
// it did as text. A write that fails is reported once by the caller, which then goes on without
// the board: TensorBoard is never a reason to stop training.

#include <cstdint>
#include <string>
#include <string_view>

#include "monitor/event_file.hpp"

namespace troupe::monitor {

// A finished optimizer step as the board draws it. `mfu`: 0 where not known (metrics off).
struct BoardStep {
  std::int64_t step = 0;
  double seconds = 0;
  std::int64_t tokens = 0;  // the whole job's tokens of the step
  double loss = 0;
  double lr = 0;
  double grad_norm = 0;
  double mfu = 0;
};

class RunBoard {
 public:
  // DIR/rank-R/ with a fresh event file (a respawned rank starts a second one beside the first).
  static Expected<RunBoard> open(const std::string& dir, int rank, bool reports);

  Status step(const BoardStep& step);
  Status validation(std::int64_t step, double loss);
  Status note(std::int64_t step, std::string_view text);  // tag "events"
  const std::string& path() const { return events_.path(); }

 private:
  RunBoard(EventFile events, bool reports) : events_(std::move(events)), reports_(reports) {}

  EventFile events_;
  bool reports_;
};

}  // namespace troupe::monitor
