#pragma once
// Linear warmup to the peak, then cosine decay to the minimum at the last step (nanoGPT's
// schedule). `step` counts from 0.

namespace troupe::compute {

struct LrSchedule {
  double peak = 1e-3;
  double minimum = 1e-4;
  long warmup_steps = 0;
  long total_steps = 1;

  double at(long step) const;
};

}  // namespace troupe::compute
