#include "comm/traffic.hpp"

namespace troupe::comm {

const char* traffic_name(TrafficKind kind) {
  static constexpr const char* names[traffic_kinds] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                                       "barrier",    "send",           "recv"};
  return names[static_cast<std::size_t>(kind)];
}

void Traffic::finished(TrafficKind kind, std::uint64_t bytes, std::chrono::steady_clock::duration elapsed) {
  TrafficTotals& t = totals_[static_cast<std::size_t>(kind)];
  t.operations.fetch_add(1, std::memory_order_relaxed);
  t.bytes.fetch_add(bytes, std::memory_order_relaxed);
  t.nanoseconds.fetch_add(
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()),
      std::memory_order_relaxed);
}

}  // namespace troupe::comm
