#include "compute/sim/modelled_clock.hpp"

#include <algorithm>
#include <thread>

namespace troupe::compute {
namespace {

// How far the due time may run ahead of now before the caller sleeps: below a scheduler tick, so
// the modelled and the slept time differ by less than that at any moment.
constexpr auto slack = std::chrono::microseconds(200);

}  // namespace

void ModelledClock::spend(double seconds) {
  if (!(seconds > 0)) return;
  total_seconds_ += seconds;
  const auto now = std::chrono::steady_clock::now();
  // Behind the due time, the rank did something else meanwhile (waited for a message, ran the
  // runtime's own code): the modelled device starts this op now. Less the last sleep's lateness,
  // which is the host's scheduler (a busy machine wakes a sleeper late), not the modelled device.
  if (due_ < now) due_ = std::max(due_, now - woke_late_);
  woke_late_ = {};
  due_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  if (due_ - now <= slack) return;
  std::this_thread::sleep_until(due_);
  woke_late_ = std::max(std::chrono::steady_clock::now() - due_, std::chrono::steady_clock::duration{});
}

}  // namespace troupe::compute
