// Where place_transfers() puts sends and recvs: the eager order (send right after its
// compute, recv right before its consumer) deadlocks under blocking sends in 1F1B and
// interleaved; the generated order does not, yet keeps every send right after its compute
// and moves a recv at most one compute ahead, so a non-blocking runtime runs both orders in
// the same time.

#include <catch2/catch.hpp>

#include "schedules/checker.hpp"
#include "schedules/generate.hpp"
#include "schedules/simulator.hpp"

using namespace troupe::schedules;

namespace {

// The same computes, each recv just before its consumer and each send just after its producer.
Schedule eager(const Schedule& schedule) {
  Schedule out = schedule;
  for (int s = 0; s < schedule.stages; ++s) {
    std::vector<Instruction>& stream = out.streams[s];
    stream.clear();
    for (const Instruction& ins : schedule.streams[s]) {
      if (is_transfer(ins.op)) continue;
      if (!is_compute(ins.op)) {
        stream.push_back(ins);
        continue;
      }
      const bool forward = ins.op == Op::forward;
      Instruction recv{forward ? Op::recv_act : Op::recv_grad, ins.microbatch, ins.chunk, -1};
      Instruction send{forward ? Op::send_act : Op::send_grad, ins.microbatch, ins.chunk, -1};
      recv.peer = peer_of(schedule, s, recv);
      send.peer = peer_of(schedule, s, send);
      if (recv.peer >= 0) stream.push_back(recv);
      stream.push_back(ins);
      if (send.peer >= 0) stream.push_back(send);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("the eager order deadlocks under blocking sends in 1f1b and interleaved", "[transfers]") {
  auto one_f_one_b = check_schedule(eager(generate_schedule(ScheduleKind::one_f_one_b, 2, 2).value()));
  REQUIRE_FALSE(one_f_one_b.ok());
  CHECK(one_f_one_b.error().message ==
        "deadlock under blocking sends: stage 0 instruction 3 (send_act mb 1 chunk 0 -> stage 1) waits for stage 1; "
        "stage 1 instruction 3 (send_grad mb 0 chunk 0 -> stage 0) waits for stage 0");
  auto interleaved = check_schedule(eager(generate_schedule(ScheduleKind::interleaved, 2, 2, 2).value()));
  REQUIRE_FALSE(interleaved.ok());
  CHECK_THAT(interleaved.error().message, Catch::StartsWith("deadlock under blocking sends"));
  // GPipe's phases never cross, so its eager order is already safe.
  CHECK(check_schedule(eager(generate_schedule(ScheduleKind::gpipe, 4, 8).value())).ok());
}

TEST_CASE("sends stay right after their compute and recvs move at most one compute ahead", "[transfers]") {
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved}) {
    for (int p = 1; p <= 6; ++p) {
      for (int m = 1; m <= 12; ++m) {
        for (int v = 1; v <= 3; ++v) {
          auto schedule = generate_schedule(kind, p, m, v);
          if (!schedule.ok()) continue;
          INFO(to_string(kind) << " p=" << p << " m=" << m << " v=" << v);
          for (const std::vector<Instruction>& stream : schedule.value().streams) {
            for (std::size_t i = 0; i < stream.size(); ++i) {
              const Instruction& ins = stream[i];
              if (is_send(ins.op)) {
                // Only transfers lie between a send and the compute that produced it.
                std::size_t j = i;
                while (j > 0 && is_transfer(stream[j - 1].op)) --j;
                REQUIRE(j > 0);
                CHECK(stream[j - 1] ==
                      Instruction{ins.op == Op::send_act ? Op::forward : Op::backward, ins.microbatch, ins.chunk, -1});
              }
              if (is_recv(ins.op)) {
                const Op consumer = ins.op == Op::recv_act ? Op::forward : Op::backward;
                int computes_between = 0;
                std::size_t j = i + 1;
                for (; j < stream.size() && stream[j] != Instruction{consumer, ins.microbatch, ins.chunk, -1}; ++j) {
                  computes_between += is_compute(stream[j].op);
                }
                CHECK(j < stream.size());
                CHECK(computes_between <= (kind == ScheduleKind::interleaved ? 1 : 0));
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("a non-blocking runtime runs the generated order as fast as the eager one", "[transfers]") {
  for (ScheduleKind kind : {ScheduleKind::gpipe, ScheduleKind::one_f_one_b, ScheduleKind::interleaved}) {
    for (int p : {2, 4}) {
      for (int m : {4, 8}) {
        const int v = kind == ScheduleKind::interleaved ? 2 : 1;
        const Schedule schedule = generate_schedule(kind, p, m, v).value();
        for (double latency : {0.0, 0.1, 0.5}) {
          CostModel costs;
          costs.forward = 1.0 / v;
          costs.backward = 2.0 / v;
          costs.latency = latency;
          INFO(to_string(kind) << " p=" << p << " m=" << m << " latency " << latency);
          CHECK(simulate(schedule, costs).value().makespan == simulate(eager(schedule), costs).value().makespan);
        }
      }
    }
  }
}
