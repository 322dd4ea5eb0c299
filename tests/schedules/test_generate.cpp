// The generators: which shapes are legal (and the one-line errors for those that are not),
// the warmup counts, exact streams for small cases (the examples in docs/schedules.md), and
// a grid of (p, m, v) where every schedule passes the checker with the expected peak of
// stashed activations.

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <string>

#include "schedules/checker.hpp"
#include "schedules/generate.hpp"

using namespace troupe::schedules;

namespace {

constexpr ScheduleKind all_kinds[] = {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved};

std::string error_of(ScheduleKind kind, int p, int m, int v) {
  auto schedule = generate_schedule(kind, p, m, v);
  return schedule.ok() ? "ok" : schedule.error().message;
}

// "F0.0 F1.0 B0.0 ...": a stage's forwards and backwards as micro-batch.chunk.
std::string compute_order(const std::vector<Instruction>& stream) {
  std::string out;
  for (const Instruction& ins : stream) {
    if (!is_compute(ins.op)) continue;
    if (!out.empty()) out += ' ';
    out += (ins.op == Op::forward ? "F" : "B") + std::to_string(ins.microbatch) + "." + std::to_string(ins.chunk);
  }
  return out;
}

// The peak of stashed activations generate_schedule promises per stage (docs/schedules.md).
int expected_peak(ScheduleKind kind, int p, int m, int v, int stage) {
  switch (kind) {
    case ScheduleKind::gpipe: return m;
    case ScheduleKind::one_f_one_b: return std::min(p - stage, m);
    case ScheduleKind::interleaved: return std::min(2 * (p - stage - 1) + (v - 1) * p + 1, m * v);
    case ScheduleKind::zb_h1:
    case ScheduleKind::zb_v: break;  // tests/schedules/test_zero_bubble.cpp
  }
  return -1;
}

}  // namespace

TEST_CASE("illegal shapes are refused with one line naming the numbers", "[generate]") {
  CHECK(error_of(ScheduleKind::one_f_one_b, 0, 4, 1) ==
        "pipeline schedule 1f1b p=0 m=4 v=1: needs at least 1 stage (p)");
  CHECK(error_of(ScheduleKind::gpipe, 2, 0, 1) ==
        "pipeline schedule gpipe p=2 m=0 v=1: needs at least 1 micro-batch (m)");
  CHECK(error_of(ScheduleKind::interleaved, 2, 2, 0) ==
        "pipeline schedule interleaved p=2 m=2 v=0: needs at least 1 chunk per stage (v)");
  CHECK(error_of(ScheduleKind::one_f_one_b, 2, 4, 2) ==
        "pipeline schedule 1f1b p=2 m=4 v=2: runs one chunk per stage; only interleaved and zb-v take v > 1");
  CHECK(error_of(ScheduleKind::gpipe, 2, 4, 2) ==
        "pipeline schedule gpipe p=2 m=4 v=2: runs one chunk per stage; only interleaved and zb-v take v > 1");
  CHECK(error_of(ScheduleKind::interleaved, 1, 4, 2) ==
        "pipeline schedule interleaved p=1 m=4 v=2: interleaving needs at least 2 stages");
  CHECK(error_of(ScheduleKind::interleaved, 2, 4, 1) ==
        "pipeline schedule interleaved p=2 m=4 v=1: interleaving needs v >= 2 chunks per stage (with one, use 1f1b)");
  CHECK(error_of(ScheduleKind::interleaved, 4, 6, 2) ==
        "pipeline schedule interleaved p=4 m=6 v=2: interleaving needs m a multiple of p, and 6 micro-batches do "
        "not split into groups of 4");
  CHECK(error_of(ScheduleKind::interleaved, 4, 2, 2) ==
        "pipeline schedule interleaved p=4 m=2 v=2: interleaving needs m a multiple of p, and 2 micro-batches do "
        "not split into groups of 4");
  CHECK(error_of(ScheduleKind::interleaved, 4, 8, 2) == "ok");
  CHECK(error_of(ScheduleKind::one_f_one_b, 4, 2, 1) == "ok");  // m < p is fine without interleaving
}

TEST_CASE("warmup counts: gpipe all forwards, 1f1b p-s-1, interleaved Megatron's 2(p-s-1)+(v-1)p", "[generate]") {
  auto warmups = [](ScheduleKind kind, int p, int m, int v) {
    std::vector<int> out;
    for (int s = 0; s < p; ++s) out.push_back(warmup_microbatches(kind, p, m, v, s));
    return out;
  };
  CHECK(warmups(ScheduleKind::gpipe, 4, 6, 1) == std::vector<int>{6, 6, 6, 6});
  CHECK(warmups(ScheduleKind::one_f_one_b, 4, 8, 1) == std::vector<int>{3, 2, 1, 0});
  CHECK(warmups(ScheduleKind::one_f_one_b, 4, 2, 1) == std::vector<int>{2, 2, 1, 0});  // m < p: capped at m
  CHECK(warmups(ScheduleKind::interleaved, 4, 8, 2) == std::vector<int>{10, 8, 6, 4});
  CHECK(warmups(ScheduleKind::interleaved, 4, 4, 2) == std::vector<int>{8, 8, 6, 4});  // capped at m·v
  CHECK(warmups(ScheduleKind::interleaved, 2, 4, 3) == std::vector<int>{6, 4});
}

TEST_CASE("1f1b p=2 m=3: the example stream of docs/schedules.md", "[generate]") {
  auto schedule = generate_schedule(ScheduleKind::one_f_one_b, 2, 3);
  REQUIRE(schedule.ok());
  CHECK(to_string(schedule.value()) == R"(1f1b p=2 m=3 v=1
stage 0:
   0  forward mb 0 chunk 0
   1  send_act mb 0 chunk 0 -> stage 1
   2  forward mb 1 chunk 0
   3  recv_grad mb 0 chunk 0 <- stage 1
   4  send_act mb 1 chunk 0 -> stage 1
   5  backward mb 0 chunk 0
   6  forward mb 2 chunk 0
   7  recv_grad mb 1 chunk 0 <- stage 1
   8  send_act mb 2 chunk 0 -> stage 1
   9  backward mb 1 chunk 0
  10  recv_grad mb 2 chunk 0 <- stage 1
  11  backward mb 2 chunk 0
  12  reduce_grads
  13  optimizer_step
stage 1:
   0  recv_act mb 0 chunk 0 <- stage 0
   1  forward mb 0 chunk 0
   2  backward mb 0 chunk 0
   3  send_grad mb 0 chunk 0 -> stage 0
   4  recv_act mb 1 chunk 0 <- stage 0
   5  forward mb 1 chunk 0
   6  backward mb 1 chunk 0
   7  send_grad mb 1 chunk 0 -> stage 0
   8  recv_act mb 2 chunk 0 <- stage 0
   9  forward mb 2 chunk 0
  10  backward mb 2 chunk 0
  11  send_grad mb 2 chunk 0 -> stage 0
  12  reduce_grads
  13  optimizer_step
)");
}

TEST_CASE("compute orders: gpipe, 1f1b and interleaved phases (docs/schedules.md)", "[generate]") {
  const Schedule gpipe = generate_schedule(ScheduleKind::gpipe, 2, 3).value();
  CHECK(compute_order(gpipe.streams[0]) == "F0.0 F1.0 F2.0 B0.0 B1.0 B2.0");
  CHECK(compute_order(gpipe.streams[1]) == "F0.0 F1.0 F2.0 B0.0 B1.0 B2.0");

  const Schedule one_f_one_b = generate_schedule(ScheduleKind::one_f_one_b, 3, 4).value();
  CHECK(compute_order(one_f_one_b.streams[0]) == "F0.0 F1.0 F2.0 B0.0 F3.0 B1.0 B2.0 B3.0");
  CHECK(compute_order(one_f_one_b.streams[1]) == "F0.0 F1.0 B0.0 F2.0 B1.0 F3.0 B2.0 B3.0");
  CHECK(compute_order(one_f_one_b.streams[2]) == "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0 F3.0 B3.0");

  // Micro-batches in groups of p = 2, each group through chunk 0 then chunk 1; backward
  // takes the chunks in reverse.
  const Schedule interleaved = generate_schedule(ScheduleKind::interleaved, 2, 4, 2).value();
  CHECK(compute_order(interleaved.streams[0]) ==
        "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 F3.0 B1.1 F2.1 B0.0 F3.1 B1.0 B2.1 B3.1 B2.0 B3.0");
  CHECK(compute_order(interleaved.streams[1]) ==
        "F0.0 F1.0 F0.1 B0.1 F1.1 B1.1 F2.0 B0.0 F3.0 B1.0 F2.1 B2.1 F3.1 B3.1 B2.0 B3.0");
}

TEST_CASE("p = 1: one stage, no sends or recvs", "[generate]") {
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b}) {
    const Schedule schedule = generate_schedule(kind, 1, 3).value();
    REQUIRE(schedule.streams.size() == 1);
    CHECK(std::none_of(schedule.streams[0].begin(), schedule.streams[0].end(),
                       [](const Instruction& i) { return is_transfer(i.op); }));
    CHECK(schedule.streams[0].size() == 3 * 2 + 2);
    CHECK(check_schedule(schedule).ok());
  }
  CHECK(compute_order(generate_schedule(ScheduleKind::one_f_one_b, 1, 3).value().streams[0]) ==
        "F0.0 B0.0 F1.0 B1.0 F2.0 B2.0");
}

TEST_CASE("grid: every legal (p, m, v) passes the checker with the promised peak memory", "[generate]") {
  int legal = 0;
  for (ScheduleKind kind : all_kinds) {
    for (int p = 1; p <= 4; ++p) {
      for (int m : {1, 2, 3, 4, 6, 8}) {
        for (int v : {1, 2}) {
          INFO(to_string(kind) << " p=" << p << " m=" << m << " v=" << v);
          const bool should_work = kind == ScheduleKind::interleaved ? (p >= 2 && v == 2 && m % p == 0) : v == 1;
          auto schedule = generate_schedule(kind, p, m, v);
          REQUIRE(schedule.ok() == should_work);
          if (!should_work) continue;
          ++legal;
          const Schedule& s = schedule.value();
          auto report = check_schedule(s);
          INFO((report.ok() ? "" : report.error().message));
          REQUIRE(report.ok());

          // Counted here, apart from the checker: one forward and one backward per (mb, chunk)
          // on every stage, and as many sends as recvs, 2·m·(p·v - 1) in all.
          int sends = 0, recvs = 0;
          for (int stage = 0; stage < p; ++stage) {
            std::map<std::pair<int, int>, int> forwards, backwards;
            for (const Instruction& ins : s.streams[stage]) {
              if (ins.op == Op::forward) ++forwards[{ins.microbatch, ins.chunk}];
              if (ins.op == Op::backward) ++backwards[{ins.microbatch, ins.chunk}];
              sends += is_send(ins.op);
              recvs += is_recv(ins.op);
            }
            CHECK(forwards.size() == static_cast<std::size_t>(m * v));
            CHECK(backwards.size() == static_cast<std::size_t>(m * v));
            for (const auto& [pair, count] : forwards) CHECK(count == 1);
            for (const auto& [pair, count] : backwards) CHECK(count == 1);
            CHECK(s.streams[stage].back().op == Op::optimizer_step);
            CHECK(s.streams[stage][s.streams[stage].size() - 2].op == Op::reduce_grads);

            CHECK(report.value().peak_stashed[stage] == expected_peak(kind, p, m, v, stage));
          }
          CHECK(sends == recvs);
          CHECK(sends == 2 * m * (p * v - 1));
          CHECK(report.value().transfers == sends);
        }
      }
    }
  }
  // gpipe and 1f1b at every (p, m) with v = 1; interleaved at p=2 (m 2, 4, 6, 8), p=3 (m 3, 6), p=4 (m 4, 8).
  CHECK(legal == 2 * 4 * 6 + 8);
}

TEST_CASE("memory: gpipe stashes m, 1f1b at most p - s, interleaved 2(p-s-1)+(v-1)p+1", "[generate]") {
  CHECK(check_schedule(generate_schedule(ScheduleKind::gpipe, 4, 8).value()).value().peak_stashed ==
        std::vector<int>{8, 8, 8, 8});
  CHECK(check_schedule(generate_schedule(ScheduleKind::one_f_one_b, 4, 8).value()).value().peak_stashed ==
        std::vector<int>{4, 3, 2, 1});
  CHECK(check_schedule(generate_schedule(ScheduleKind::one_f_one_b, 4, 2).value()).value().peak_stashed ==
        std::vector<int>{2, 2, 2, 1});
  // Counted in chunks, each 1/v of a stage's layers: stage 0 of p=4, m=8, v=2 holds 11 chunk
  // activations, 5.5 stages' worth, against 1f1b's 4.
  CHECK(check_schedule(generate_schedule(ScheduleKind::interleaved, 4, 8, 2).value()).value().peak_stashed ==
        std::vector<int>{11, 9, 7, 5});
  CHECK(check_schedule(generate_schedule(ScheduleKind::interleaved, 4, 4, 2).value()).value().peak_stashed ==
        std::vector<int>{8, 8, 7, 5});
}

TEST_CASE("wide grid: p up to 8, m up to 32, v up to 4 all pass the checker", "[generate]") {
  for (ScheduleKind kind : all_kinds) {
    for (int p = 1; p <= 8; ++p) {
      for (int m = 1; m <= 32; ++m) {
        for (int v = 1; v <= 4; ++v) {
          auto schedule = generate_schedule(kind, p, m, v);
          if (!schedule.ok()) continue;
          auto report = check_schedule(schedule.value());
          INFO(to_string(kind) << " p=" << p << " m=" << m << " v=" << v << ": "
                               << (report.ok() ? "" : report.error().message));
          REQUIRE(report.ok());
          for (int s = 0; s < p; ++s) CHECK(report.value().peak_stashed[s] == expected_peak(kind, p, m, v, s));
        }
      }
    }
  }
}
