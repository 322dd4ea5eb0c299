#include "comm/traffic.hpp"

namespace troupe::comm {

const char* traffic_name(TrafficKind kind) {
  static constexpr const char* names[traffic_kinds] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                                       "barrier",    "send",           "recv"};
  return names[static_cast<std::size_t>(kind)];
}

void Traffic::finished(TrafficKind kind, std::uint64_t bytes, std::chrono::steady_clock::duration elapsed,
                       bool tensor_parallel) {
  const auto nanoseconds =
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count());
  for (auto* totals : {&totals_, &tensor_parallel_}) {
    if (totals == &tensor_parallel_ && !tensor_parallel) break;
    TrafficTotals& t = (*totals)[static_cast<std::size_t>(kind)];
    t.operations.fetch_add(1, std::memory_order_relaxed);
    t.bytes.fetch_add(bytes, std::memory_order_relaxed);
    t.nanoseconds.fetch_add(nanoseconds, std::memory_order_relaxed);
  }
}

}  // namespace troupe::comm
