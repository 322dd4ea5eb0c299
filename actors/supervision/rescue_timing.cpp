#include "actors/supervision/rescue_timing.hpp"

#include <cmath>

namespace troupe::actors {

RescueTiming rescue_timing(double rescue_timeout_seconds) {
  const std::chrono::milliseconds job_wait{std::llround(rescue_timeout_seconds * 1000)};
  return {job_wait, job_wait * 5 / 6, job_wait + rescue_stop_margin, job_wait + rescue_stop_margin};
}

}  // namespace troupe::actors
