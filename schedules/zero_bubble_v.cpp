// ZB-V's compute orders: the V schedule of Qi et al., "Pipeline Parallelism with Controllable
// Memory" (2024), as its authors' scheduler builds it (zero_bubble.hpp says the rules). Written
// for Troupe from the paper's description and its reference scheduler's steps.
//
// The scheduler places ops one stage at a time on a timeline of unit costs and keeps, per
// stage, the idle time it has let in (its bubble, counted from the stage's first forward). Ops
// are named here as the scheduler sees them, by direction: a forward runs down the V (model
// chunk 0, stages 0 to p-1) or up it (model chunk 1, p-1 to 0); a B runs down the gradient's
// path (model chunk 1's backward, stages 0 to p-1) or up it (model chunk 0's). "Down" ops of
// stage s wait for stage s-1's, "up" ops for stage s+1's; the bottom of the V hands over on
// stage p-1 itself.

#include <algorithm>
#include <array>
#include <deque>
#include <limits>

#include "schedules/zero_bubble.hpp"

namespace troupe::schedules {
namespace {

enum Kind { F = 0, B = 1, W = 2 };
constexpr int down = 0, up = 1;
constexpr double not_run = -1.0;

// Unit costs per chunk of one micro-batch (the paper's T_F = T_B = T_W) and a message's latency,
// a hundredth of an op (the reference runs its scheduler at 1000 per op and 10 per message).
constexpr std::array<double, 3> cost = {1.0, 1.0, 1.0};
constexpr double latency = 0.01;

struct Plan {
  std::vector<std::vector<Instruction>> computes;
  std::vector<double> stage_bubble;
  double max_bubble = 0.0;
};

class VPlanner {
 public:
  // `approved`: the per-stage bubbles of an earlier plan (empty for the first one). A stage may
  // then let in as much idle time as the worst stage needed there beyond its own.
  VPlanner(int stages, int microbatches, bool fill_input, bool fill_forward, std::vector<double> approved)
      : p_(stages),
        m_(microbatches),
        fill_input_(fill_input),
        fill_forward_(fill_forward),
        approved_(approved.empty() ? std::vector<double>(stages, -1.0) : std::move(approved)),
        max_approved_(*std::max_element(approved_.begin(), approved_.end())),
        end_(static_cast<std::size_t>(6 * p_ * m_), not_run),
        count_(p_, std::array<int, 6>{}),
        now_(p_, 0.0),
        held_(p_, 0),
        bubble_(p_, 0.0),
        owed_(p_),
        computes_(p_) {}

  Plan run() {
    warm_up();
    for (int round = 0; round < 2 * m_; ++round) {
      place_inputs();
      place_forwards();
    }
    for (int s = 0; s < p_; ++s)
      while (!owed_[s].empty()) put_weights(s);
    return Plan{std::move(computes_), bubble_, max_bubble()};
  }

 private:
  int id(int kind, int dir, int stage, int mb) const { return ((kind * 2 + dir) * p_ + stage) * m_ + mb; }
  int& count(int stage, int kind, int dir) { return count_[stage][kind * 2 + dir]; }
  // When the op this stage's next (kind, dir) waits for on the neighbour ended; not_run if none.
  double neighbour_end(int kind, int dir, int stage) {
    const int mb = count(stage, kind, dir);
    if (dir == up && stage < p_ - 1) return end_[id(kind, up, stage + 1, mb)];
    if (dir == down && stage > 0) return end_[id(kind, down, stage - 1, mb)];
    return not_run;
  }
  bool has_neighbour(int dir, int stage) const { return dir == up ? stage < p_ - 1 : stage > 0; }

  double max_bubble(int stage = -1) const {
    double worst = *std::max_element(bubble_.begin(), bubble_.end());
    if (stage >= 0) worst = std::max(worst, max_approved_ - approved_[stage]);
    return worst;
  }

  void put(int kind, int dir, int stage) {
    const int mb = count(stage, kind, dir);
    TROUPE_CHECK(mb < m_, "ZB-V scheduler placed an op past the last micro-batch");
    TROUPE_CHECK(held_[stage] + (kind == F   ? 1
                                 : kind == W ? -1
                                             : 0) <=
                     limit(),
                 "ZB-V scheduler went past its memory bound");
    const double unhindered = now_[stage] + cost[kind];
    double end = unhindered;
    if (kind != W && has_neighbour(dir, stage)) {
      const double input = neighbour_end(kind, dir, stage);
      TROUPE_CHECK(input >= 0, "ZB-V scheduler placed an op before its input");
      end = std::max(end, input + latency + cost[kind]);
    }
    if (count(stage, F, down) > 0) bubble_[stage] += end - unhindered;
    end_[id(kind, dir, stage, mb)] = end;
    now_[stage] = end;
    held_[stage] += kind == F ? 1 : kind == W ? -1 : 0;
    if (kind == B) owed_[stage].push_back(dir);
    ++count(stage, kind, dir);
    // Forward down is model chunk 0; a backward's direction is the reverse of its chunk's forward.
    const int chunk = kind == F ? dir : 1 - dir;
    const Op op = kind == F ? Op::forward : kind == B ? Op::backward_input : Op::backward_weights;
    computes_[stage].push_back(Instruction{op, mb, chunk, -1});
  }
  void put_weights(int stage) {
    const int dir = owed_[stage].front();
    owed_[stage].pop_front();
    put(W, dir, stage);
  }
  // A stage holds a pair from its forward to its W: 2p pairs is 1F1B's first stage's p
  // micro-batches, a chunk being half a stage.
  int limit() const { return 2 * p_; }

  // Before an op of `kind` in `dir`: W's into the time its input still takes to arrive, and one
  // more when the wait would exceed the bubble this stage may let in.
  void fill_before(int kind, int dir, int stage, bool fill) {
    if (!has_neighbour(dir, stage)) return;
    const double input = neighbour_end(kind, dir, stage);
    while (!owed_[stage].empty() && input + latency >= now_[stage] + cost[W]) put_weights(stage);
    if (fill && !owed_[stage].empty() && input + latency - now_[stage] > max_bubble(stage) - bubble_[stage])
      put_weights(stage);
  }

  // The V's first forwards: one down on every stage; then from the bottom up each stage's first
  // forward up, with as many downs before it (on it and the stages above) as fit in the wait and
  // the memory; then downs and ups in turns until each stage has run as many as the one above.
  void warm_up() {
    for (int s = 0; s < p_; ++s) put(F, down, s);
    for (int s = p_ - 1; s >= 0; --s) {
      if (s < p_ - 1) {
        const double arrives = end_[id(F, up, s + 1, 0)] + latency;
        while (held_[s] + 2 + 2 * s <= limit() && now_[s] + cost[F] <= arrives && count(s, F, down) < m_)
          for (int t = 0; t <= s; ++t) put(F, down, t);
      }
      put(F, up, s);
    }
    int dir = down;
    for (int s = 1; s < p_; ++s) {
      while (count(s, F, down) + count(s, F, up) < count(s - 1, F, down) + count(s - 1, F, up) ||
             (count(s, F, up) <= count(s - 1, F, up) && count(s - 1, F, up) < m_)) {
        for (int t = p_ - 1; t >= s; --t)
          if (count(t, F, dir) < m_) put(F, dir, t);
        dir = 1 - dir;
      }
    }
  }

  // One B per stage: every stage's next B up whose gradient is there (the stage nearest the top
  // first), then the B's down (from the top); W's first where the memory or the wait asks.
  void place_inputs() {
    for (int s = 0; s < p_; ++s)
      while (held_[s] > limit()) put_weights(s);
    std::vector<int> downs, ups;
    for (int s = 0; s < p_; ++s) {
      if (count(s, B, up) >= count(s, B, down))
        downs.push_back(s);
      else if (s == p_ - 1 || end_[id(B, up, s + 1, count(s, B, up))] >= 0 || count(s, B, down) >= m_)
        ups.push_back(s);
      else
        downs.push_back(s);
    }
    std::vector<std::pair<int, int>> order;
    for (auto s = ups.rbegin(); s != ups.rend(); ++s) order.emplace_back(*s, up);
    for (int s : downs) order.emplace_back(s, down);
    for (auto [s, dir] : order) {
      fill_before(B, dir, s, dir == up || fill_input_);
      put(B, dir, s);
    }
  }

  // At most one forward per stage: up when the stage above has sent one, else down when its
  // input is there; W's first where the memory or the wait asks.
  void place_forwards() {
    for (int s = 0; s < p_; ++s) {
      if (count(s, F, up) >= m_) continue;
      int dir = -1;
      if (count(s, F, up) >= count(s, F, down))
        dir = down;
      else if (s == p_ - 1 || end_[id(F, up, s + 1, count(s, F, up))] >= 0)
        dir = up;
      else if (count(s, F, down) < m_ && (s == 0 || end_[id(F, down, s - 1, count(s, F, down))] >= 0))
        dir = down;
      if (dir < 0) continue;
      while (held_[s] + 1 > limit()) put_weights(s);
      fill_before(F, dir, s, fill_forward_);
      put(F, dir, s);
    }
  }

  const int p_, m_;
  const bool fill_input_, fill_forward_;
  const std::vector<double> approved_;
  const double max_approved_;
  std::vector<double> end_;                // end_[id(kind, dir, stage, mb)]: when that op ended, or not_run
  std::vector<std::array<int, 6>> count_;  // ops placed per stage, per (kind, dir)
  std::vector<double> now_;                // when each stage's last placed op ends
  std::vector<int> held_;                  // pairs forwarded and not yet W'd, per stage
  std::vector<double> bubble_;             // idle time let in per stage
  std::vector<std::deque<int>> owed_;      // direction of each B whose W is owed, in order
  std::vector<std::vector<Instruction>> computes_;
};

// A plan, then replans that let each stage idle as long as the worst one did, while that helps.
Plan refined(int p, int m, bool fill_input, bool fill_forward) {
  Plan best = VPlanner(p, m, fill_input, fill_forward, {}).run();
  for (;;) {
    Plan next = VPlanner(p, m, fill_input, fill_forward, best.stage_bubble).run();
    if (!(next.max_bubble < best.max_bubble)) return best;
    best = std::move(next);
  }
}

}  // namespace

std::vector<std::vector<Instruction>> zb_v_computes(const Schedule& shape) {
  const int p = shape.stages, m = shape.microbatches;
  Plan best;
  bool first = true;
  for (bool fill_input : {true, false}) {
    for (bool fill_forward : {true, false}) {
      Plan plan = refined(p, m, fill_input, fill_forward);
      if (first || plan.max_bubble < best.max_bubble) best = std::move(plan);
      first = false;
    }
  }
  return std::move(best.computes);
}

}  // namespace troupe::schedules
