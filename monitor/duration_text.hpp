#pragma once
// A duration as people read it in progress lines: "42s", "3m07s", "2h05m" (rounded, never negative).

#include <string>

namespace troupe::monitor {

std::string duration_text(double seconds);

}  // namespace troupe::monitor
