#include "compute/memory_ledger.hpp"

#include <cstdio>

namespace troupe::compute {
namespace {

thread_local MemoryKind current_kind = MemoryKind::other;

void raise_peak(std::atomic<std::uint64_t>& peak, std::uint64_t value) {
  std::uint64_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

std::string_view memory_kind_name(MemoryKind kind) {
  switch (kind) {
    case MemoryKind::runtime: return "runtime";
    case MemoryKind::parameters: return "parameters";
    case MemoryKind::gathered_parameters: return "gathered_parameters";
    case MemoryKind::gradients: return "gradients";
    case MemoryKind::optimizer_state: return "optimizer_state";
    case MemoryKind::activations: return "activations";
    case MemoryKind::comm_buffers: return "comm_buffers";
    case MemoryKind::other: return "other";
  }
  TROUPE_CHECK(false, "unknown memory kind");
}

void MemoryLedger::add(MemoryKind kind, std::uint64_t bytes, Device device) {
  Table& t = table(device);
  Counter& c = t.kinds[static_cast<std::size_t>(kind)];
  raise_peak(c.peak, c.bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes);
  raise_peak(t.total.peak, t.total.bytes.fetch_add(bytes, std::memory_order_relaxed) + bytes);
}

void MemoryLedger::remove(MemoryKind kind, std::uint64_t bytes, Device device) {
  Table& t = table(device);
  t.kinds[static_cast<std::size_t>(kind)].bytes.fetch_sub(bytes, std::memory_order_relaxed);
  t.total.bytes.fetch_sub(bytes, std::memory_order_relaxed);
}

void MemoryLedger::measure_runtime() {
  Counter& c = host_.kinds[static_cast<std::size_t>(MemoryKind::runtime)];
  const std::uint64_t old = c.bytes.load();
  const std::uint64_t counted = host_.total.bytes.load() - old;
  const std::uint64_t resident = resident_bytes(), peak_resident = peak_resident_bytes();
  const std::uint64_t runtime = resident > counted ? resident - counted : 0;
  if (runtime >= old)
    add(MemoryKind::runtime, runtime - old);
  else
    remove(MemoryKind::runtime, old - runtime);
  // What the process reached before now is part of its history: the runtime's peak and the
  // total's take the resident set's peak so far (a start-up transient, such as the MFU's sgemm).
  raise_peak(c.peak, peak_resident > counted ? peak_resident - counted : 0);
  raise_peak(host_.total.peak, peak_resident);
}

MemoryReport MemoryLedger::report(Device device) const {
  const Table& t = table(device);
  MemoryReport r;
  for (std::size_t k = 0; k < memory_kind_count; ++k)
    r.kinds[k] = {t.kinds[k].bytes.load(std::memory_order_relaxed), t.kinds[k].peak.load(std::memory_order_relaxed)};
  r.total = {t.total.bytes.load(std::memory_order_relaxed), t.total.peak.load(std::memory_order_relaxed)};
  return r;
}

MemoryLedger& memory_ledger() {
  static MemoryLedger ledger;
  return ledger;
}

MemoryScope::MemoryScope(MemoryKind kind) : previous_(current_kind) { current_kind = kind; }
MemoryScope::~MemoryScope() { current_kind = previous_; }
MemoryKind current_memory_kind() { return current_kind; }

std::string format_bytes(std::uint64_t bytes) {
  char text[32];
  if (bytes >= (std::uint64_t{1} << 30))
    std::snprintf(text, sizeof text, "%.2f GiB", static_cast<double>(bytes) / (1 << 30));
  else if (bytes >= (std::uint64_t{1} << 20))
    std::snprintf(text, sizeof text, "%.1f MiB", static_cast<double>(bytes) / (1 << 20));
  else if (bytes >= 1024)
    std::snprintf(text, sizeof text, "%.0f KiB", static_cast<double>(bytes) / 1024);
  else
    std::snprintf(text, sizeof text, "%llu B", static_cast<unsigned long long>(bytes));
  return text;
}

std::string describe(const MemoryReport& report, bool peaks) {
  std::string out;
  for (MemoryKind kind : memory_kinds) {
    const MemoryCount& c = report[kind];
    if (c.bytes == 0 && c.peak == 0) continue;
    if (!out.empty()) out += ", ";
    out += std::string(memory_kind_name(kind)) + " " + format_bytes(c.bytes);
    if (peaks) out += " (peak " + format_bytes(c.peak) + ")";
  }
  if (out.empty()) out = "nothing";
  return out + "; total " + format_bytes(report.total.bytes) + ", peak " + format_bytes(report.total.peak);
}

}  // namespace troupe::compute
