#include "compute/optim/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace troupe::compute {

double LrSchedule::at(long step) const {
  if (step < warmup_steps) return peak * static_cast<double>(step + 1) / static_cast<double>(warmup_steps);
  long decay_steps = std::max(1L, total_steps - 1 - warmup_steps);
  double progress = std::clamp(static_cast<double>(step - warmup_steps) / static_cast<double>(decay_steps), 0.0, 1.0);
  double cosine = 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
  return minimum + cosine * (peak - minimum);
}

}  // namespace troupe::compute
