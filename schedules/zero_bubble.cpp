#include "schedules/zero_bubble.hpp"

#include <algorithm>

namespace troupe::schedules {
namespace {

std::vector<std::vector<Instruction>> h1_computes(const Schedule& shape) {
  const int p = shape.stages, m = shape.microbatches;
  std::vector<std::vector<Instruction>> computes(p);
  for (int s = 0; s < p; ++s) {
    std::vector<Instruction>& order = computes[s];
    const int warmup = std::min(p - s - 1, m);
    int next_weight = 0;
    auto weights_while = [&](int owed_above, int input_done) {
      while (input_done - next_weight > owed_above) order.push_back({Op::backward_weights, next_weight++, 0, -1});
    };
    for (int k = 0; k < warmup; ++k) order.push_back({Op::forward, k, 0, -1});
    for (int k = 0; k < m - warmup; ++k) {
      order.push_back({Op::forward, warmup + k, 0, -1});
      order.push_back({Op::backward_input, k, 0, -1});
      weights_while(s, k + 1);
    }
    for (int k = m - warmup; k < m; ++k) {
      order.push_back({Op::backward_input, k, 0, -1});
      if (next_weight <= k) order.push_back({Op::backward_weights, next_weight++, 0, -1});
    }
    weights_while(0, m);
  }
  return computes;
}

}  // namespace

std::vector<std::vector<Instruction>> zero_bubble_computes(const Schedule& shape) {
  TROUPE_CHECK(splits_backward(shape.kind), "zero_bubble_computes of a schedule that does not split backward");
  return shape.kind == ScheduleKind::zb_h1 ? h1_computes(shape) : zb_v_computes(shape);
}

}  // namespace troupe::schedules
