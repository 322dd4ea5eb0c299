#include "schedules/simulator.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <string>

#include "schedules/weights_fill.hpp"

namespace troupe::schedules {

double stream_cost(const Schedule& schedule, const CostModel& costs, int stage, std::size_t i) {
  const Op op = schedule.streams[static_cast<std::size_t>(stage)][i].op;
  if (!costs.op_costs.empty()) return costs.op_costs[static_cast<std::size_t>(stage)][i];
  const auto s = static_cast<std::size_t>(stage);
  if (op == Op::forward) return costs.forward * (costs.forward_scale.empty() ? 1.0 : costs.forward_scale[s]);
  const double backward = costs.backward * (costs.backward_scale.empty() ? 1.0 : costs.backward_scale[s]);
  if (op == Op::backward_input) return backward * (1 - costs.weight_share);
  if (op == Op::backward_weights) return backward * costs.weight_share;
  return backward;
}

Expected<Simulation> simulate(const Schedule& schedule, const CostModel& costs) {
  const int p = schedule.stages;
  if (costs.forward < 0 || costs.backward < 0 || costs.latency < 0 || costs.dispatch < 0 || costs.reduce_grads < 0 ||
      costs.optimizer_step < 0) {
    return Error{"simulate: costs must not be negative"};
  }
  if (!(costs.weight_share >= 0 && costs.weight_share <= 1)) return Error{"simulate: weight_share must be in [0, 1]"};
  for (const auto* scale : {&costs.forward_scale, &costs.backward_scale}) {
    if (!scale->empty() && static_cast<int>(scale->size()) != p) {
      return Error{std::string("simulate: ") + (scale == &costs.forward_scale ? "forward" : "backward") +
                   "_scale has " + std::to_string(scale->size()) + " factors for " + std::to_string(p) + " stages"};
    }
  }
  if (!costs.speeds.empty()) {
    if (static_cast<int>(costs.speeds.size()) != p)
      return Error{"simulate: speeds has " + std::to_string(costs.speeds.size()) + " entries for " + std::to_string(p) +
                   " stages"};
    if (std::any_of(costs.speeds.begin(), costs.speeds.end(), [](double v) { return !(v > 0 && std::isfinite(v)); }))
      return Error{"simulate: every stage's speed must be a positive number"};
  }
  if (static_cast<int>(schedule.streams.size()) != p) return Error{"simulate: one stream per stage expected"};
  if (!costs.op_costs.empty()) {
    if (static_cast<int>(costs.op_costs.size()) != p)
      return Error{"simulate: op_costs has " + std::to_string(costs.op_costs.size()) + " rows for " +
                   std::to_string(p) + " stages"};
    for (int s = 0; s < p; ++s) {
      const std::vector<double>& row = costs.op_costs[static_cast<std::size_t>(s)];
      if (row.size() != schedule.streams[static_cast<std::size_t>(s)].size())
        return Error{"simulate: op_costs row " + std::to_string(s) + " has " + std::to_string(row.size()) +
                     " entries for a stream of " +
                     std::to_string(schedule.streams[static_cast<std::size_t>(s)].size()) + " instructions"};
      if (std::any_of(row.begin(), row.end(), [](double cost) { return cost < 0; }))
        return Error{"simulate: costs must not be negative"};
    }
  }

  Simulation sim;
  sim.busy.assign(p, 0.0);
  sim.timings.resize(p);
  for (int s = 0; s < p; ++s) sim.timings[s].resize(schedule.streams[s].size());
  std::vector<std::size_t> pc(p, 0);
  std::vector<double> clock(p, 0.0);
  std::map<Transfer, double> arrival;  // messages posted so far and when they are usable
  std::vector<WeightsFill> fills;      // per stage: the Ws it ran before their place
  for (int s = 0; s < p; ++s) fills.emplace_back(schedule.streams[s]);

  const auto cost_of = [&](int s, std::size_t i) {
    const Instruction& ins = schedule.streams[s][i];
    if (!is_compute(ins.op)) return ins.op == Op::reduce_grads ? costs.reduce_grads : costs.optimizer_step;
    return stream_cost(schedule, costs, s, i) / (costs.speeds.empty() ? 1.0 : costs.speeds[s]);
  };
  std::vector<bool> computed(p, false);  // per stage: has it run a compute yet
  // The instruction at streams[s][i], starting once the stage is free and `ready_at` has come; a
  // compute after the stage's first also waits for the runtime's dispatch, which overlaps the wait
  // for its input.
  const auto run_at = [&](int s, std::size_t i, double ready_at = 0.0) {
    OpTiming& timing = sim.timings[s][i];
    const double cost = cost_of(s, i);
    const bool compute = is_compute(schedule.streams[s][i].op);
    if (compute) sim.busy[s] += cost;
    clock[s] = std::max(clock[s] + (compute && computed[s] ? costs.dispatch : 0.0), ready_at);
    if (compute) computed[s] = true;
    timing.start = clock[s];
    clock[s] += cost;
    timing.end = clock[s];
    const Op op = schedule.streams[s][i].op;
    if (is_compute(op) && op != Op::forward) sim.flush = std::max(sim.flush, clock[s]);
  };
  const auto next_weights = [&](int s) -> std::optional<std::size_t> {
    if (!costs.fill_waits_with_weights) return std::nullopt;
    return fills[s].next(pc[s]);
  };
  // The input a compute at the stage's next place waits for, if its virtual stage has a neighbour
  // to send one (W has none: it reads what its B kept).
  const auto input_of = [&](int s) -> std::optional<Transfer> {
    const Instruction& ins = schedule.streams[s][pc[s]];
    if (!is_compute(ins.op) || ins.op == Op::backward_weights) return std::nullopt;
    const Op input = ins.op == Op::forward ? Op::recv_act : Op::recv_grad;
    return transfer_of(schedule, s, Instruction{input, ins.microbatch, ins.chunk, -1});
  };

  // In the order of the stages' clocks: the stage that is earliest takes its next instruction. A
  // stage whose input is not posted yet waits (its sender is behind it) — or, filling waits with
  // weights, runs its next W once no stage that could still post its input is behind it: every
  // stage that could post is then later, so the input will come later still.
  for (;;) {
    int ready = -1, filling = -1;
    for (int s = 0; s < p; ++s) {
      if (pc[s] == schedule.streams[s].size()) continue;
      if (fills[s].ran_early(pc[s])) {
        ++pc[s];
        --s;  // look at the same stage again
        continue;
      }
      const std::optional<Transfer> input = input_of(s);
      if (!input || arrival.count(*input)) {
        if (ready < 0 || clock[s] < clock[ready]) ready = s;
      } else if (next_weights(s) && (filling < 0 || clock[s] < clock[filling])) {
        filling = s;
      }
    }
    if (ready < 0 && filling < 0) break;
    if (ready < 0 || (filling >= 0 && clock[filling] < clock[ready])) {
      const std::size_t w = *next_weights(filling);
      run_at(filling, w);
      fills[filling].ran(w);
      continue;
    }
    const int s = ready;
    const Instruction& ins = schedule.streams[s][pc[s]];
    if (is_transfer(ins.op)) {
      // Posting takes no time; a recv's end (its arrival) is filled in below.
      const std::optional<Transfer> transfer = transfer_of(schedule, s, ins);
      if (!transfer) {
        return Error{"simulate: stage " + std::to_string(s) + " instruction " + std::to_string(pc[s]) + " (" +
                     to_string(ins) + ") has no peer"};
      }
      if (is_send(ins.op)) arrival[*transfer] = clock[s] + costs.latency;
      sim.timings[s][pc[s]] = OpTiming{clock[s], clock[s]};
      ++pc[s];
      continue;
    }
    const std::optional<Transfer> input = input_of(s);
    const double input_at = input ? arrival.at(*input) : 0.0;
    if (input_at > clock[s]) {
      if (const auto w = next_weights(s)) {  // the input comes later: a W first
        run_at(s, *w);
        fills[s].ran(*w);
        continue;
      }
    }
    run_at(s, pc[s], input_at);
    ++pc[s];
  }
  std::string stuck;
  for (int s = 0; s < p; ++s) {
    if (pc[s] == schedule.streams[s].size()) continue;
    stuck += (stuck.empty() ? "" : ", ") + std::string("stage ") + std::to_string(s) + " instruction " +
             std::to_string(pc[s]) + " (" + to_string(schedule.streams[s][pc[s]]) + ")";
  }
  if (!stuck.empty())
    return Error{"simulate: the streams cannot finish; waiting for input that is never sent: " + stuck};
  for (int s = 0; s < p; ++s) {
    const std::vector<Instruction>& stream = schedule.streams[s];
    for (std::size_t i = 0; i < stream.size(); ++i) {
      if (!is_recv(stream[i].op)) continue;
      const auto it = arrival.find(*transfer_of(schedule, s, stream[i]));
      if (it == arrival.end()) {
        return Error{"simulate: stage " + std::to_string(s) + " instruction " + std::to_string(i) + " (" +
                     to_string(stream[i]) + ") receives a message that is never sent"};
      }
      sim.timings[s][i].end = std::max(sim.timings[s][i].start, it->second);
    }
    sim.makespan = std::max(sim.makespan, clock[s]);
  }
  double total_busy = 0.0;
  for (double b : sim.busy) total_busy += b;
  sim.bubble = sim.flush > 0 ? 1.0 - total_busy / (p * sim.flush) : 0.0;
  return sim;
}

}  // namespace troupe::schedules
