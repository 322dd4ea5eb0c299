#pragma once
// Ws that fill waits (schedule.hpp, fills_waits_with_weights): over one stage's stream, which W
// may run before its place. The stream's next W not yet run, and only once its B has run, so the
// Ws keep their stream order among themselves and every gradient is the same sum. The simulator
// and the runtime's stage (actors/worker/pipeline_trainer.hpp) both take their Ws from here.

#include <cstddef>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "schedules/instruction.hpp"

namespace troupe::schedules {

class WeightsFill {
 public:
  explicit WeightsFill(const std::vector<Instruction>& stream);

  // The W to run before the instruction at `at` (whose input is late), if any: the stream's next
  // W after `at` not yet run, provided its B stands before `at`.
  std::optional<std::size_t> next(std::size_t at) const;
  // The W at `w` has run before its place; the stream skips it there.
  void ran(std::size_t w) { ran_early_[w] = true; }
  bool ran_early(std::size_t i) const { return ran_early_[i]; }

 private:
  const std::vector<Instruction>* stream_;
  std::vector<bool> ran_early_;
  std::map<std::pair<int, int>, std::size_t> input_position_;  // (micro-batch, chunk) → its B's place
};

}  // namespace troupe::schedules
