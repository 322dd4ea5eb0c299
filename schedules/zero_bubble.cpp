#include "schedules/zero_bubble.hpp"

#include <algorithm>
#include <deque>
#include <limits>

namespace troupe::schedules {
namespace {

constexpr int never = std::numeric_limits<int>::max();

// Lock-step state of one stage's chunks.
struct ChunkState {
  int next_forward = 0, next_input = 0;  // micro-batches forwarded, and given their B
  std::deque<int> owed_weights;          // micro-batches whose B ran and W has not, in order
};

}  // namespace

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

std::vector<std::vector<Instruction>> zero_bubble_computes(const Schedule& shape) {
  TROUPE_CHECK(splits_backward(shape.kind), "zero_bubble_computes of a schedule that does not split backward");
  if (shape.kind == ScheduleKind::zb_h1) return h1_computes(shape);
  const int p = shape.stages, m = shape.microbatches, v = shape.chunks, last = shape.virtual_stages() - 1;
  // When each (virtual stage, micro-batch)'s input is usable: the step its producer finished.
  std::vector<std::vector<int>> activations(shape.virtual_stages(), std::vector<int>(m, never));
  std::vector<std::vector<int>> gradients(shape.virtual_stages(), std::vector<int>(m, never));
  std::fill(activations[0].begin(), activations[0].end(), 0);
  std::vector<std::vector<ChunkState>> state(p, std::vector<ChunkState>(v));
  std::vector<int> held(p, 0);
  const int limit = 2 * std::min(p, m);
  std::vector<std::vector<Instruction>> computes(p);
  const std::size_t total = static_cast<std::size_t>(3) * m * v;
  for (int step = 0;; ++step) {
    bool all_done = true;
    for (int s = 0; s < p; ++s) all_done = all_done && computes[s].size() == total;
    if (all_done) break;
    TROUPE_CHECK(step <= 3 * m * v * p + 2 * p * v, "zero-bubble list scheduler made no progress");
    // Every stage decides from what finished by this step, then all run for one step.
    std::vector<Instruction> chosen(p, Instruction{Op::reduce_grads, 0, 0, -1});
    for (int s = 0; s < p; ++s) {
      Instruction best{Op::reduce_grads, 0, 0, -1};
      int best_vs = -1;
      // 1. B: the lowest micro-batch whose gradient is here, then the virtual stage nearest the loss.
      for (int c = 0; c < v; ++c) {
        const ChunkState& chunk = state[s][c];
        const int mb = chunk.next_input, vs = shape.virtual_stage(s, c);
        if (mb >= chunk.next_forward || gradients[vs][mb] > step) continue;
        if (best_vs < 0 || mb < best.microbatch || (mb == best.microbatch && vs > best_vs)) {
          best = Instruction{Op::backward_input, mb, c, -1};
          best_vs = vs;
        }
      }
      // 2. A forward within the memory bound: the pair furthest along first.
      if (best_vs < 0 && held[s] < limit) {
        for (int c = 0; c < v; ++c) {
          const ChunkState& chunk = state[s][c];
          const int mb = chunk.next_forward, vs = shape.virtual_stage(s, c);
          if (mb >= m || activations[vs][mb] > step) continue;
          if (best_vs < 0 || mb < best.microbatch || (mb == best.microbatch && vs > best_vs)) {
            best = Instruction{Op::forward, mb, c, -1};
            best_vs = vs;
          }
        }
      }
      // 3. The oldest owed W: its chunk's first, the lowest micro-batch over the chunks.
      if (best_vs < 0) {
        for (int c = 0; c < v; ++c) {
          const ChunkState& chunk = state[s][c];
          if (chunk.owed_weights.empty()) continue;
          const int mb = chunk.owed_weights.front();
          if (best_vs < 0 || mb < best.microbatch) {
            best = Instruction{Op::backward_weights, mb, c, -1};
            best_vs = shape.virtual_stage(s, c);
          }
        }
      }
      chosen[s] = best;
    }
    for (int s = 0; s < p; ++s) {
      const Instruction& ins = chosen[s];
      if (ins.op == Op::reduce_grads) continue;  // idle this step
      ChunkState& chunk = state[s][ins.chunk];
      const int vs = shape.virtual_stage(s, ins.chunk);
      if (ins.op == Op::forward) {
        ++chunk.next_forward;
        ++held[s];
        if (vs < last) activations[vs + 1][ins.microbatch] = step + 1;
        if (vs == last) gradients[vs][ins.microbatch] = step + 1;  // the loss is its own gradient
      } else if (ins.op == Op::backward_input) {
        ++chunk.next_input;
        chunk.owed_weights.push_back(ins.microbatch);
        if (vs > 0) gradients[vs - 1][ins.microbatch] = step + 1;
      } else {
        chunk.owed_weights.pop_front();
        --held[s];
      }
      computes[s].push_back(ins);
    }
  }
  return computes;
}

}  // namespace troupe::schedules
