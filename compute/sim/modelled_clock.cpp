#include "compute/sim/modelled_clock.hpp"

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
  if (due_ < now) due_ = now;
  due_ += std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds));
  if (due_ - now > slack) std::this_thread::sleep_until(due_);
}

}  // namespace troupe::compute
