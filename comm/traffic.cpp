#include "comm/traffic.hpp"

namespace troupe::comm {

const char* traffic_name(TrafficKind kind) {
  static constexpr const char* names[traffic_kinds] = {"all_reduce", "reduce_scatter", "all_gather", "broadcast",
                                                       "barrier",    "send",           "recv"};
  return names[static_cast<std::size_t>(kind)];
}

const char* context_traffic_name(ContextTraffic kind) {
  static constexpr const char* names[context_traffic_kinds] = {"ring_shift", "all_to_all"};
  return names[static_cast<std::size_t>(kind)];
}

namespace {

void add(TrafficTotals& t, std::uint64_t bytes, std::chrono::steady_clock::duration elapsed) {
  t.operations.fetch_add(1, std::memory_order_relaxed);
  t.bytes.fetch_add(bytes, std::memory_order_relaxed);
  t.nanoseconds.fetch_add(
      static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(elapsed).count()),
      std::memory_order_relaxed);
}

}  // namespace

void Traffic::finished(TrafficKind kind, std::uint64_t bytes, std::chrono::steady_clock::duration elapsed,
                       bool tensor_parallel) {
  add(totals_[static_cast<std::size_t>(kind)], bytes, elapsed);
  if (tensor_parallel) add(tensor_parallel_[static_cast<std::size_t>(kind)], bytes, elapsed);
}

void Traffic::context_finished(ContextTraffic kind, std::uint64_t bytes, std::chrono::steady_clock::duration elapsed) {
  add(context_[static_cast<std::size_t>(kind)], bytes, elapsed);
}

void Traffic::expert_finished(std::uint64_t bytes, std::chrono::steady_clock::duration elapsed) {
  add(expert_, bytes, elapsed);
}

}  // namespace troupe::comm
