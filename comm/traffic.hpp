#pragma once
// What an engine has moved, counted for the node's metrics (docs/metrics.md): per collective kind
// and per point-to-point direction, the operations finished, their bytes and their seconds, plus
// what is in flight. Plain atomics, written by the progress thread (and by posting threads for
// the in-flight counts) and read by any thread at any time: comm/ knows nothing of the metrics
// library that reads them, and counting costs a few relaxed atomic adds per operation.

#include <array>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace troupe::comm {

// Point-to-point means messages an engine user sends itself (MessageKind::point_to_point), such
// as a pipeline's activations; a collective's own messages count for the collective only.
enum class TrafficKind : std::uint8_t { all_reduce, reduce_scatter, all_gather, broadcast, barrier, send, recv };
inline constexpr std::size_t traffic_kinds = 7;
// "all_reduce", …, "send", "recv": the metric's label value.
const char* traffic_name(TrafficKind kind);

// A context group's exchanges (compute/context/context_exchange.hpp), counted by the exchange that
// makes them from point-to-point messages: each ring shift and each all-to-all once, with the
// bytes this rank sent and the seconds it spent posting and waiting (a shift's transfer that
// overlapped compute counts only the wait at its end). Their messages count as send/recv as well.
enum class ContextTraffic : std::uint8_t { ring_shift, all_to_all };
inline constexpr std::size_t context_traffic_kinds = 2;
// "ring_shift" or "all_to_all": the metric's label value.
const char* context_traffic_name(ContextTraffic kind);

// Which group an exchange over point-to-point messages serves, so that its traffic counts apart:
// a context group's ring shifts and all-to-alls, or an expert group's dispatch and combine (an
// MoE block's all-to-alls, compute/moe/expert_exchange.hpp).
enum class ExchangeGroup : std::uint8_t { context, expert };

struct TrafficTotals {
  std::atomic<std::uint64_t> operations{0};
  std::atomic<std::uint64_t> bytes{0};        // a collective's buffer; a message's payload
  std::atomic<std::uint64_t> nanoseconds{0};  // from post to completion, waiting for peers included
};

class Traffic {
 public:
  // A successful operation of `kind`; failed ones are not counted. A collective over the tensor
  // shards' group (grid.hpp's tp_group_id) counts a second time apart, so the shards' sums on
  // the critical path can be told from the overlapped data-parallel ones.
  void finished(TrafficKind kind, std::uint64_t bytes, std::chrono::steady_clock::duration elapsed,
                bool tensor_parallel = false);
  const TrafficTotals& totals(TrafficKind kind) const { return totals_[static_cast<std::size_t>(kind)]; }
  const TrafficTotals& tensor_parallel_totals(TrafficKind kind) const {
    return tensor_parallel_[static_cast<std::size_t>(kind)];
  }
  // A context group's exchange, as above.
  void context_finished(ContextTraffic kind, std::uint64_t bytes, std::chrono::steady_clock::duration elapsed);
  const TrafficTotals& context_totals(ContextTraffic kind) const { return context_[static_cast<std::size_t>(kind)]; }
  // An expert group's all-to-all (its counts, a dispatch or a combine), counted as a context
  // group's are and apart from them.
  void expert_finished(std::uint64_t bytes, std::chrono::steady_clock::duration elapsed);
  const TrafficTotals& expert_totals() const { return expert_; }

  // Send and receive requests posted to the engine and not complete (a collective's messages
  // included), and collectives posted and not finished.
  std::atomic<std::int64_t> requests_in_flight{0};
  std::atomic<std::int64_t> collectives_in_flight{0};

 private:
  std::array<TrafficTotals, traffic_kinds> totals_, tensor_parallel_;
  std::array<TrafficTotals, context_traffic_kinds> context_;
  TrafficTotals expert_;
};

}  // namespace troupe::comm
