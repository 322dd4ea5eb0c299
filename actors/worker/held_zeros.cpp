#include "actors/worker/held_zeros.hpp"

#include <algorithm>

#include "compute/memory_ledger.hpp"

namespace troupe::actors {

void hold_zeros_outside(std::vector<checkpoint::HeldRange>& held, const std::string& kind,
                        std::vector<std::pair<std::int64_t, std::int64_t>> covered, std::int64_t begin,
                        std::int64_t end, compute::Tensor& zeros) {
  std::sort(covered.begin(), covered.end());
  std::vector<std::pair<std::int64_t, std::int64_t>> gaps;
  std::int64_t next = begin;
  for (const auto& [from, to] : covered) {
    if (from > next) gaps.emplace_back(next, from);
    next = std::max(next, to);
  }
  if (next < end) gaps.emplace_back(next, end);
  std::int64_t largest = 0;
  for (const auto& [from, to] : gaps) largest = std::max(largest, to - from);
  if (!zeros.defined() || zeros.numel() < largest) {
    compute::MemoryScope scope(compute::MemoryKind::optimizer_state);
    zeros = compute::Tensor::zeros({largest}, compute::DType::f32);
  }
  for (const auto& [from, to] : gaps) held.push_back({kind, from, to, zeros.data_as<float>(), true, false, true});
}

}  // namespace troupe::actors
