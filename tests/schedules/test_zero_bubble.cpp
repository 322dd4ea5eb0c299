// The zero-bubble schedules: ZB-H1 and ZB-V generated for a grid of (p, m), each passing the
// checker with every forward, B and W once, W's in micro-batch order per chunk, within 1F1B's
// activation bound; their simulated bubbles against 1F1B's; and the checker refusing a stream
// with a W missing or a B after its W.

#include <catch2/catch.hpp>

#include <algorithm>
#include <iterator>
#include <string>
#include <vector>

#include "schedules/checker.hpp"
#include "schedules/generate.hpp"
#include "schedules/simulator.hpp"

using namespace troupe::schedules;

namespace {

Schedule generated(ScheduleKind kind, int p, int m) {
  auto schedule = generate_schedule(kind, p, m, kind == ScheduleKind::zb_v ? 2 : 1);
  REQUIRE(schedule.ok());
  return *schedule;
}

double bubble(const Schedule& schedule) {
  auto sim = simulate(schedule, CostModel{});
  REQUIRE(sim.ok());
  return sim->bubble;
}

// Each chunk's W's name its micro-batches 0, 1, ... in order.
bool weights_in_order(const Schedule& schedule) {
  for (const auto& stream : schedule.streams) {
    std::vector<int> next(static_cast<std::size_t>(schedule.chunks), 0);
    for (const Instruction& ins : stream)
      if (ins.op == Op::backward_weights && ins.microbatch != next[static_cast<std::size_t>(ins.chunk)]++) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("zb-h1 and zb-v pass the checker for p up to 6 and m up to 10, within 1F1B's activations",
          "[generate][zero-bubble]") {
  for (ScheduleKind kind : {ScheduleKind::zb_h1, ScheduleKind::zb_v}) {
    for (int p = kind == ScheduleKind::zb_v ? 2 : 1; p <= 6; ++p) {
      for (int m = 1; m <= 10; ++m) {
        INFO(to_string(kind) << " p=" << p << " m=" << m);
        const Schedule schedule = generated(kind, p, m);
        auto report = check_schedule(schedule);
        REQUIRE(report.ok());
        CHECK(weights_in_order(schedule));
        // 1F1B's peak is its first stage's min(p, m) micro-batches; a ZB-V chunk is half a stage.
        const int bound = (kind == ScheduleKind::zb_v ? 2 : 1) * std::min(p, m);
        CHECK(*std::max_element(report->peak_stashed.begin(), report->peak_stashed.end()) <= bound);
        if (kind == ScheduleKind::zb_h1) CHECK(report->peak_stashed.front() == bound);
        for (int s = 0; s < p; ++s) CHECK(report->peak_weights_owed[static_cast<std::size_t>(s)] >= 1);
      }
    }
  }
}

TEST_CASE("zb-v places stage s's chunks at virtual stages s and 2p-1-s, and the V's bottom is no message",
          "[generate][zero-bubble]") {
  const Schedule schedule = generated(ScheduleKind::zb_v, 4, 4);
  for (int s = 0; s < 4; ++s) {
    CHECK(schedule.virtual_stage(s, 0) == s);
    CHECK(schedule.virtual_stage(s, 1) == 7 - s);
    CHECK(schedule.stage_of(7 - s) == s);
    CHECK(schedule.chunk_of(7 - s) == 1);
  }
  for (const Instruction& ins : schedule.streams[3]) CHECK(ins.peer != 3);  // stage 3 holds virtual stages 3 and 4
}

TEST_CASE("simulated bubbles at F = B = W: zb-h1 a third of 1f1b's, zb-v under a quarter", "[simulate][zero-bubble]") {
  // 1F1B: (p-1)/(m+p-1); ZB-H1: (p-1)/(3m+p-1), the paper's (p-1)(T_F + T_B - T_W) idle per stage.
  const double one_f_one_b = bubble(generated(ScheduleKind::one_f_one_b, 2, 8));
  CHECK(one_f_one_b == Approx(1.0 / 9));
  CHECK(bubble(generated(ScheduleKind::zb_h1, 2, 8)) == Approx(1.0 / 25));
  CHECK(bubble(generated(ScheduleKind::zb_h1, 4, 8)) == Approx(3.0 / 27));
  CHECK(bubble(generated(ScheduleKind::zb_h1, 2, 8)) <= 0.45 * one_f_one_b);
  CostModel halves;  // a ZB-V chunk is half a stage
  halves.forward = 0.5;
  halves.backward = 1.0;
  auto v = simulate(generated(ScheduleKind::zb_v, 2, 8), halves);
  REQUIRE(v.ok());
  CHECK(v->bubble <= 0.25 * one_f_one_b);
  CHECK(v->flush < simulate(generated(ScheduleKind::one_f_one_b, 2, 8), CostModel{})->flush);
}

TEST_CASE("zb-v keeps its bubble near a quarter of 1f1b's when B and W differ", "[simulate][zero-bubble]") {
  // The V scheduler plans on F = B = W; real W's take a third of the backward, or two thirds. A
  // list scheduler run lock step on unit costs left 0.163 at p 2 m 8 with W a third (1.47x
  // 1F1B's); the V schedule stays near its F = B = W figure: at most 0.25x 1F1B's at p 2, 0.3x at p 4.
  for (int p : {2, 4}) {
    const double one_f_one_b = bubble(generated(ScheduleKind::one_f_one_b, p, 8));
    for (double weight_share : {1.0 / 3, 0.5, 2.0 / 3}) {
      INFO("p=" << p << " W share " << weight_share);
      CostModel halves;  // a ZB-V chunk is half a stage
      halves.forward = 0.5;
      halves.backward = 1.0;
      halves.weight_share = weight_share;
      auto v = simulate(generated(ScheduleKind::zb_v, p, 8), halves);
      REQUIRE(v.ok());
      CHECK(v->bubble <= (p == 2 ? 0.25 : 0.3) * one_f_one_b);
    }
  }
}

TEST_CASE("the checker refuses a zero-bubble stream with a W missing or a B after its W", "[checker][zero-bubble]") {
  const Schedule schedule = generated(ScheduleKind::zb_h1, 2, 4);
  auto find = [](std::vector<Instruction>& stream, Op op, int microbatch) {
    return std::find_if(stream.begin(), stream.end(),
                        [&](const Instruction& i) { return i.op == op && i.microbatch == microbatch; });
  };
  Schedule missing = schedule;
  missing.streams[1].erase(find(missing.streams[1], Op::backward_weights, 2));
  auto report = check_schedule(missing);
  REQUIRE(!report.ok());
  CHECK(report.error().message == "stage 1: no backward_weights of mb 2 chunk 0 (its backward_input ran)");

  Schedule swapped = schedule;
  std::vector<Instruction>& stream = swapped.streams[0];
  const auto input = find(stream, Op::backward_input, 1);
  const auto weights = find(stream, Op::backward_weights, 1);
  REQUIRE(input < weights);
  std::iter_swap(input, weights);
  report = check_schedule(swapped);
  REQUIRE(!report.ok());
  CHECK_THAT(report.error().message, Catch::Contains("(backward_weights mb 1 chunk 0): weight gradients before "
                                                     "their backward_input"));

  Schedule both = schedule;  // a pair backwarded whole and split
  both.streams[1].insert(find(both.streams[1], Op::backward_input, 0), Instruction{Op::backward, 0, 0, -1});
  report = check_schedule(both);
  REQUIRE(!report.ok());
  CHECK_THAT(report.error().message, Catch::Contains("(backward_input mb 0 chunk 0): runs twice"));
}

TEST_CASE("the checker refuses a zb-v stream whose V's bottom overwrites a gradient it handed down before it was taken",
          "[checker][zero-bubble]") {
  // Stage 1 of p 2 holds virtual stages 1 (chunk 0) and 2 (chunk 1): chunk 1's B hands its input
  // gradient to chunk 0's B where it lies, so chunk 1's next B must wait for chunk 0's to take it.
  Schedule late = generated(ScheduleKind::zb_v, 2, 4);
  std::vector<Instruction>& stream = late.streams[1];
  auto is_lower_mb0 = [](const Instruction& i) {
    return i.microbatch == 0 && i.chunk == 0 &&
           (i.op == Op::backward_input || i.op == Op::send_grad || i.op == Op::backward_weights);
  };
  std::vector<Instruction> moved;
  std::copy_if(stream.begin(), stream.end(), std::back_inserter(moved), is_lower_mb0);
  REQUIRE(moved.size() == 3);
  stream.erase(std::remove_if(stream.begin(), stream.end(), is_lower_mb0), stream.end());
  const auto next_upper = std::find_if(stream.begin(), stream.end(), [](const Instruction& i) {
    return i.op == Op::backward_input && i.chunk == 1 && i.microbatch == 1;
  });
  REQUIRE(next_upper != stream.end());
  stream.insert(next_upper + 1, moved.begin(), moved.end());
  auto report = check_schedule(late);
  REQUIRE(!report.ok());
  CHECK_THAT(report.error().message, Catch::Contains("(backward_input mb 1 chunk 1): backward before the chunk below "
                                                     "it on this stage took micro-batch 0's gradient"));
}
