#pragma once
// The process's memory, counted by kind (docs/parallelism.md, "Memory by kind"). Every tensor
// allocation adds its bytes to the kind that the allocating thread's innermost MemoryScope names
// (`other` outside any scope) and its release takes them off again; comm/ adds the buffers it
// allocates itself. `runtime` is what the process held before the model was built and the ledger
// does not see (libraries, threads, the corpus): measured once, RSS less the ledger's host bytes.
// The counters are atomics: any thread allocates, any thread reads.

#include <array>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "compute/resident_memory.hpp"
#include "compute/tensor.hpp"

namespace troupe::compute {

enum class MemoryKind : std::uint8_t {
  runtime,              // what the process held before the model: libraries, threads, buffers, corpus
  parameters,           // the flat parameter buffer (a stage's own slice)
  gathered_parameters,  // ZeRO-3 parameters gathered from the other shards (none yet: stays 0)
  gradients,            // the flat gradient buffer
  optimizer_state,      // AdamW's moments (a shard of them under ZeRO)
  activations,          // activation slots (stashed micro-batches included), scratch, batches
  comm_buffers,         // the comm engine's lent and mapped regions, message staging
  other,                // tensors allocated outside every scope
};
inline constexpr std::size_t memory_kind_count = 8;
inline constexpr std::array<MemoryKind, memory_kind_count> memory_kinds{
    MemoryKind::runtime,         MemoryKind::parameters,  MemoryKind::gathered_parameters, MemoryKind::gradients,
    MemoryKind::optimizer_state, MemoryKind::activations, MemoryKind::comm_buffers,        MemoryKind::other};
std::string_view memory_kind_name(MemoryKind kind);  // "optimizer_state"

struct MemoryCount {
  std::uint64_t bytes = 0;  // now
  std::uint64_t peak = 0;   // the most since the process started
};

// One device's figures: each kind, and their sum with the sum's own peak (which is not the sum of
// the peaks: kinds peak at different moments).
struct MemoryReport {
  std::array<MemoryCount, memory_kind_count> kinds{};
  MemoryCount total;
  const MemoryCount& operator[](MemoryKind kind) const { return kinds[static_cast<std::size_t>(kind)]; }
};

class MemoryLedger {
 public:
  void add(MemoryKind kind, std::uint64_t bytes, Device device = Device::cpu);
  void remove(MemoryKind kind, std::uint64_t bytes, Device device = Device::cpu);
  // Sets `runtime` on the host to what the process holds now that the ledger does not count:
  // resident bytes less the host bytes counted so far (never below 0); its peak, and the total's,
  // are raised to the resident set's peak so far (VmHWM) less, for runtime, the bytes counted.
  // Call once, before the model is built; a later call replaces the current figure.
  void measure_runtime();
  MemoryReport report(Device device = Device::cpu) const;

 private:
  struct Counter {
    std::atomic<std::uint64_t> bytes{0};
    std::atomic<std::uint64_t> peak{0};
  };
  struct Table {
    std::array<Counter, memory_kind_count> kinds;
    Counter total;
  };
  Table& table(Device device) { return device == Device::cpu ? host_ : device_; }
  const Table& table(Device device) const { return device == Device::cpu ? host_ : device_; }

  Table host_;
  Table device_;  // cuda
};

// The process's ledger (every tensor counts here).
MemoryLedger& memory_ledger();

// While alive, tensors this thread allocates count as `kind`. Scopes nest; the innermost wins.
class MemoryScope {
 public:
  explicit MemoryScope(MemoryKind kind);
  ~MemoryScope();
  MemoryScope(const MemoryScope&) = delete;
  MemoryScope& operator=(const MemoryScope&) = delete;

 private:
  MemoryKind previous_;
};
MemoryKind current_memory_kind();

// "runtime 41.2 MiB, parameters 1.6 MiB, ... = 48.0 MiB (peak 52.1 MiB)": the kinds that are not
// 0 now or at their peak, then the total; with `peaks`, each kind's peak in brackets.
std::string describe(const MemoryReport& report, bool peaks);
std::string format_bytes(std::uint64_t bytes);  // "41.2 MiB", "812 KiB", "17 B"

}  // namespace troupe::compute
