#pragma once
// Spends modelled seconds as wall time. Each charge moves a due time forward; the caller sleeps
// only once the due time is more than a short slack ahead of now, so thousands of microsecond ops
// add up to the modelled total without a sleep (and a scheduler wake-up) each. Sleeping, not
// spinning: a thousand sim ranks share two cores, and a sleeping rank leaves them to the others.

#include <chrono>

namespace troupe::compute {

class ModelledClock {
 public:
  // Adds `seconds` to the modelled total and sleeps until the due time if it is far enough ahead.
  void spend(double seconds);
  // The modelled seconds charged so far.
  double total_seconds() const { return total_seconds_; }

 private:
  std::chrono::steady_clock::time_point due_{};
  std::chrono::steady_clock::duration woke_late_{};  // how late the last sleep ended
  double total_seconds_ = 0;
};

}  // namespace troupe::compute
