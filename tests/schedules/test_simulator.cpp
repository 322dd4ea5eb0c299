// The simulator's predictions against the closed forms: with uniform costs, zero latency and
// backward = 2 × forward, GPipe and 1F1B leave a bubble of exactly (p-1)/(m+p-1) and
// interleaved 1F1B (chunks cost 1/v of a stage) exactly (p-1)/(v·m+p-1); latency only adds
// time; costs given op by op are used where each op stands; per-op timings are consistent; a
// dispatch between two computes of a stage hides behind a wait for input;
// bad cost models are refused.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "schedules/generate.hpp"
#include "schedules/simulator.hpp"

using namespace troupe::schedules;

namespace {

// Costs of one chunk when a stage's forward takes 1 s and its backward 2 s.
CostModel uniform(int chunks, double latency = 0.0) {
  CostModel costs;
  costs.forward = 1.0 / chunks;
  costs.backward = 2.0 / chunks;
  costs.latency = latency;
  return costs;
}

Simulation run(ScheduleKind kind, int p, int m, int v, const CostModel& costs) {
  auto schedule = generate_schedule(kind, p, m, v);
  REQUIRE(schedule.ok());
  auto sim = simulate(schedule.value(), costs);
  REQUIRE(sim.ok());
  return sim.value();
}

}  // namespace

TEST_CASE("gpipe and 1f1b: bubble (p-1)/(m+p-1) and makespan (m+p-1)(F+B), exactly", "[simulator]") {
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
    for (int p = 1; p <= 4; ++p) {
      for (int m : {1, 2, 3, 4, 6, 8}) {
        INFO(to_string(kind) << " p=" << p << " m=" << m);
        const Simulation sim = run(kind, p, m, 1, uniform(1));
        CHECK(std::abs(sim.bubble - double(p - 1) / (m + p - 1)) < 1e-12);
        CHECK(sim.makespan == (m + p - 1) * 3.0);
        CHECK(sim.flush == sim.makespan);
        for (double busy : sim.busy) CHECK(busy == m * 3.0);
      }
    }
  }
}

TEST_CASE("interleaved: bubble (p-1)/(v·m+p-1) exactly, smaller than 1f1b's", "[simulator]") {
  for (int p = 2; p <= 4; ++p) {
    for (int m : {2, 3, 4, 6, 8}) {
      if (m % p != 0) continue;
      for (int v : {2, 3}) {
        INFO("p=" << p << " m=" << m << " v=" << v);
        const Simulation sim = run(ScheduleKind::interleaved, p, m, v, uniform(v));
        CHECK(std::abs(sim.bubble - double(p - 1) / (v * m + p - 1)) < 1e-12);
        CHECK(sim.bubble < run(ScheduleKind::one_f_one_b, p, m, 1, uniform(1)).bubble);
        for (double busy : sim.busy) CHECK(std::abs(busy - m * 3.0) < 1e-12);  // the same work as 1f1b
      }
    }
  }
  // The figures docs/schedules.md quotes, p = 4, m = 8: 1f1b 3/11, interleaved v=2 3/19.
  CHECK(run(ScheduleKind::one_f_one_b, 4, 8, 1, uniform(1)).bubble == Approx(3.0 / 11));
  CHECK(run(ScheduleKind::interleaved, 4, 8, 2, uniform(2)).bubble == Approx(3.0 / 19));
}

TEST_CASE("latency adds time: gpipe by 2(p-1)·latency, every pipeline by something", "[simulator]") {
  for (int p : {1, 2, 4}) {
    for (int m : {4, 8}) {
      INFO("p=" << p << " m=" << m);
      CHECK(run(ScheduleKind::gpipe, p, m, 1, uniform(1, 0.25)).makespan == (m + p - 1) * 3.0 + 2 * (p - 1) * 0.25);
      for (ScheduleKind kind : {ScheduleKind::one_f_one_b, ScheduleKind::interleaved}) {
        const int v = kind == ScheduleKind::interleaved ? 2 : 1;
        if (kind == ScheduleKind::interleaved && (p < 2 || m % p != 0)) continue;
        const double still = run(kind, p, m, v, uniform(v)).makespan;
        const double slow = run(kind, p, m, v, uniform(v, 0.1)).makespan;
        if (p == 1) CHECK(slow == still);  // nothing to send
        if (p > 1) CHECK(slow > still);
        if (p > 1) CHECK(run(kind, p, m, v, uniform(v, 0.5)).makespan > slow);
      }
    }
  }
  // p = 4, m = 8, latency 0.1 s against a 1 s stage forward: interleaved still wins.
  CHECK(run(ScheduleKind::interleaved, 4, 8, 2, uniform(2, 0.1)).makespan <
        run(ScheduleKind::one_f_one_b, 4, 8, 1, uniform(1, 0.1)).makespan);
}

TEST_CASE("reduce_grads and optimizer_step follow the flush and stay out of the bubble", "[simulator]") {
  CostModel costs = uniform(1);
  costs.reduce_grads = 0.5;
  costs.optimizer_step = 0.25;
  const Simulation sim = run(ScheduleKind::one_f_one_b, 3, 4, 1, costs);
  CHECK(sim.flush == 6 * 3.0);
  CHECK(sim.makespan == sim.flush + 0.75);
  CHECK(sim.bubble == Approx(2.0 / 6));
}

TEST_CASE("an unbalanced pipeline runs at the pace of its slowest stage", "[simulator]") {
  CostModel costs = uniform(1);
  costs.forward_scale = {1.0, 2.0};
  costs.backward_scale = {1.0, 2.0};
  const int m = 6;
  const Simulation sim = run(ScheduleKind::one_f_one_b, 2, m, 1, costs);
  CHECK(sim.busy == std::vector<double>{3.0 * m, 6.0 * m});
  // Stage 1 never waits once it has mb 0: stage 0's first forward, stage 1's work, stage 0's last backward.
  CHECK(sim.makespan == 1.0 + 6.0 * m + 2.0);
  CHECK(sim.bubble > run(ScheduleKind::one_f_one_b, 2, m, 1, uniform(1)).bubble);
}

TEST_CASE("op_costs: each forward and backward takes its own cost where it stands", "[simulator]") {
  const Schedule schedule = generate_schedule(ScheduleKind::one_f_one_b, 2, 4).value();
  CostModel costs = uniform(1);
  costs.forward_scale = {1.0, 1.5};
  costs.backward_scale = {1.0, 1.25};
  CostModel per_op;
  for (int s = 0; s < 2; ++s) {
    std::vector<double>& row = per_op.op_costs.emplace_back();
    for (const Instruction& ins : schedule.streams[s])
      row.push_back(ins.op == Op::forward    ? costs.forward * costs.forward_scale[s]
                    : ins.op == Op::backward ? costs.backward * costs.backward_scale[s]
                                             : 99.0);  // not a compute: never read
  }
  const Simulation scaled = simulate(schedule, costs).value();
  const Simulation op_by_op = simulate(schedule, per_op).value();
  CHECK(op_by_op.makespan == scaled.makespan);
  CHECK(op_by_op.busy == scaled.busy);
  CHECK(op_by_op.bubble == scaled.bubble);

  // Uniform 1f1b p=2 m=4 takes 15 s; stage 1's backward of mb 2 runs in [8, 10] on the
  // critical path, so making it 3 s slower delays the flush by 3 s.
  CostModel slow_op;
  for (int s = 0; s < 2; ++s) {
    std::vector<double>& row = slow_op.op_costs.emplace_back();
    for (const Instruction& ins : schedule.streams[s])
      row.push_back(ins.op == Op::forward ? 1.0 : s == 1 && ins.microbatch == 2 ? 5.0 : 2.0);
  }
  CHECK(simulate(schedule, uniform(1)).value().makespan == 15.0);
  CHECK(simulate(schedule, slow_op).value().makespan == 18.0);
}

TEST_CASE("per-op timings: computes back to back in stream order, recvs end when data arrives", "[simulator]") {
  const Schedule schedule = generate_schedule(ScheduleKind::one_f_one_b, 2, 3).value();
  const Simulation sim = simulate(schedule, uniform(1, 0.5)).value();
  for (int s = 0; s < 2; ++s) {
    REQUIRE(sim.timings[s].size() == schedule.streams[s].size());
    double last_end = 0.0;
    for (std::size_t i = 0; i < schedule.streams[s].size(); ++i) {
      const OpTiming& t = sim.timings[s][i];
      CHECK(t.end >= t.start);
      if (is_recv(schedule.streams[s][i].op)) continue;  // a posted recv completes while the stage goes on
      CHECK(t.start >= last_end);
      last_end = t.end;
    }
  }
  // Stage 0: forward mb 0 in [0, 1], send posted at 1. Stage 1 posts its recv at 0, the data
  // arrives at 1.5, and its forward mb 0 runs in [1.5, 2.5].
  CHECK(sim.timings[0][0].start == 0.0);
  CHECK(sim.timings[0][0].end == 1.0);
  CHECK(sim.timings[0][1].start == 1.0);
  CHECK(sim.timings[1][0].start == 0.0);
  CHECK(sim.timings[1][0].end == 1.5);
  CHECK(sim.timings[1][1].start == 1.5);
  CHECK(sim.timings[1][1].end == 2.5);
}

TEST_CASE("filling waits with weights: a W runs before its place while an input is late, Ws keep their order",
          "[simulator][zero-bubble]") {
  const Schedule schedule = generate_schedule(ScheduleKind::zb_v, 2, 8, 2).value();
  CostModel costs;
  costs.weight_share = 0.35;
  costs.latency = 0.2;
  const Simulation in_place = simulate(schedule, costs).value();
  costs.fill_waits_with_weights = true;
  const Simulation filled = simulate(schedule, costs).value();
  // The same work; the flush no later, and here earlier (`troupe schedule` prints 0.046 and 0.040).
  CHECK(filled.busy == in_place.busy);
  CHECK(filled.flush < in_place.flush);
  CHECK(filled.bubble < in_place.bubble - 0.004);
  int moved = 0;
  for (int s = 0; s < 2; ++s) {
    const std::vector<Instruction>& stream = schedule.streams[s];
    const std::vector<OpTiming>& t = filled.timings[s];
    double last_weights_start = -1;
    std::vector<std::pair<double, double>> computes;
    for (std::size_t i = 0; i < stream.size(); ++i) {
      if (!is_compute(stream[i].op)) continue;
      computes.emplace_back(t[i].start, t[i].end);
      if (stream[i].op != Op::backward_weights) continue;
      CHECK(t[i].start > last_weights_start);  // in stream order among themselves
      last_weights_start = t[i].start;
      // After its own B.
      for (std::size_t j = 0; j < i; ++j)
        if (stream[j].op == Op::backward_input && stream[j].microbatch == stream[i].microbatch &&
            stream[j].chunk == stream[i].chunk)
          CHECK(t[i].start >= t[j].end);
      // Before a compute that stands ahead of it in the stream: moved into a wait.
      for (std::size_t j = 0; j < i; ++j)
        if (is_compute(stream[j].op) && t[j].start > t[i].start) {
          ++moved;
          break;
        }
    }
    // One compute at a time on a stage.
    std::sort(computes.begin(), computes.end());
    for (std::size_t k = 1; k < computes.size(); ++k) CHECK(computes[k].first >= computes[k - 1].second - 1e-12);
  }
  CHECK(moved > 0);
  // Without latency the inputs of ZB-V at equal costs are never late: nothing moves.
  costs.latency = 0;
  const Simulation prompt = simulate(schedule, costs).value();
  costs.fill_waits_with_weights = false;
  CHECK(prompt.flush == simulate(schedule, costs).value().flush);
}

TEST_CASE("dispatch: the runtime's time between two computes of a stage, hidden by a wait for input", "[simulator]") {
  // One stage: every compute after the first waits out the dispatch, 2m - 1 of them.
  CostModel costs = uniform(1);
  costs.dispatch = 0.25;
  const Simulation alone = run(ScheduleKind::one_f_one_b, 1, 4, 1, costs);
  CHECK(alone.flush == Approx(4 * 3.0 + 7 * 0.25));
  CHECK(alone.bubble > 0);
  // Two stages, one micro-batch, a message taking 1: stage 1's forward waits for its input (its
  // first compute, no dispatch) and its B follows after a dispatch (3 + 0.5); stage 0's B waits
  // for the gradient (5.5 + 1), past its dispatch (1 + 0.5), so that one is hidden: 6.5 + 2.
  costs.latency = 1.0;
  costs.dispatch = 0.5;
  const Simulation two = run(ScheduleKind::one_f_one_b, 2, 1, 1, costs);
  CHECK(two.flush == Approx(8.5));
  costs.dispatch = 0.0;
  CHECK(run(ScheduleKind::one_f_one_b, 2, 1, 1, costs).flush == Approx(8.0));
}

TEST_CASE("bad cost models and unfinishable streams are refused", "[simulator]") {
  const Schedule schedule = generate_schedule(ScheduleKind::gpipe, 2, 2).value();
  CostModel negative = uniform(1);
  negative.latency = -1.0;
  CHECK(simulate(schedule, negative).error().message == "simulate: costs must not be negative");
  CostModel negative_dispatch = uniform(1);
  negative_dispatch.dispatch = -0.1;
  CHECK(simulate(schedule, negative_dispatch).error().message == "simulate: costs must not be negative");
  CostModel wrong_scale = uniform(1);
  wrong_scale.backward_scale = {1.0, 1.0, 1.0};
  CHECK(simulate(schedule, wrong_scale).error().message == "simulate: backward_scale has 3 factors for 2 stages");
  CostModel wrong_rows = uniform(1);
  wrong_rows.op_costs = {std::vector<double>(schedule.streams[0].size(), 1.0)};
  CHECK(simulate(schedule, wrong_rows).error().message == "simulate: op_costs has 1 rows for 2 stages");
  CostModel short_row = uniform(1);
  short_row.op_costs = {std::vector<double>(schedule.streams[0].size(), 1.0), {1.0}};
  CHECK(simulate(schedule, short_row).error().message ==
        "simulate: op_costs row 1 has 1 entries for a stream of 10 instructions");
  CostModel negative_op = uniform(1);
  negative_op.op_costs = {std::vector<double>(schedule.streams[0].size(), 1.0),
                          std::vector<double>(schedule.streams[1].size(), -1.0)};
  CHECK(simulate(schedule, negative_op).error().message == "simulate: costs must not be negative");

  Schedule missing_send = schedule;
  std::erase_if(missing_send.streams[0],
                [](const Instruction& i) { return i.op == Op::send_act && i.microbatch == 1; });
  CHECK(simulate(missing_send, uniform(1)).error().message ==
        "simulate: the streams cannot finish; waiting for input that is never sent: stage 0 instruction 4 (backward "
        "mb 0 chunk 0), stage 1 instruction 3 (forward mb 1 chunk 0)");

  Schedule stray_recv = schedule;
  stray_recv.streams[0].insert(stray_recv.streams[0].begin(), Instruction{Op::recv_grad, 7, 0, 1});
  CHECK(simulate(stray_recv, uniform(1)).error().message ==
        "simulate: stage 0 instruction 0 (recv_grad mb 7 chunk 0 <- stage 1) receives a message that is never sent");
}
