// The engine's traffic counts (comm/traffic.hpp), which the node's metrics read: each collective
// counts its buffer once under its own kind, point-to-point messages count under send and recv,
// a collective's own messages never count as point-to-point, nothing stays in flight, and a
// context group's exchanges count apart by method.

#include "rank_support.hpp"

#include <future>

#include "comm/grid.hpp"

using namespace troupe::comm;
using namespace troupe::comm::test;
using troupe::Error;
using troupe::Expected;
using troupe::compute::DType;
using troupe::compute::Tensor;

TEST_CASE("the engine counts each collective and point-to-point message by kind, bytes and time", "[traffic]") {
  run_ranks(2, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    auto comm = world(engine, CollectiveOptions{4096, 2});
    if (!comm) return comm.error();
    const Traffic& traffic = *engine.traffic();
    Tensor grads = Tensor::zeros({10000}, DType::f32);
    for (int i = 0; i < 3; ++i)
      if (auto s = (*comm)->all_reduce(grads); !s) return s.error();
    if (auto s = (*comm)->all_gather(Tensor::zeros({100}, DType::f64)); !s) return s.error();
    if (auto s = (*comm)->barrier(); !s) return s.error();

    const int peer = 1 - engine.rank();
    std::vector<float> out(256, 1.0f), in(256);
    std::promise<troupe::Status> sent, received;
    engine.post_send(peer, MessageKey{}, out.data(), out.size() * sizeof(float),
                     [&](troupe::Status s) { sent.set_value(s); });
    engine.post_recv(peer, MessageKey{}, in.data(), in.size() * sizeof(float),
                     [&](troupe::Status s) { received.set_value(s); });
    if (auto s = sent.get_future().get(); !s) return s.error();
    if (auto s = received.get_future().get(); !s) return s.error();

    const TrafficTotals& all_reduce = traffic.totals(TrafficKind::all_reduce);
    if (all_reduce.operations != 3) return wrong("all_reduce operations", all_reduce.operations, 3);
    if (all_reduce.bytes != 3 * 40000) return wrong("all_reduce bytes", all_reduce.bytes, 3 * 40000);
    if (all_reduce.nanoseconds == 0) return Error{"all_reduce took no time"};
    if (traffic.totals(TrafficKind::all_gather).bytes != 800)
      return wrong("all_gather bytes", traffic.totals(TrafficKind::all_gather).bytes, 800);
    if (traffic.totals(TrafficKind::barrier).operations != 1)
      return wrong("barriers", traffic.totals(TrafficKind::barrier).operations, 1);
    if (traffic.totals(TrafficKind::barrier).bytes != 0)
      return wrong("barrier bytes", traffic.totals(TrafficKind::barrier).bytes, 0);
    if (traffic.totals(TrafficKind::broadcast).operations != 0)
      return wrong("broadcasts", traffic.totals(TrafficKind::broadcast).operations, 0);
    for (TrafficKind kind : {TrafficKind::send, TrafficKind::recv}) {
      if (traffic.totals(kind).operations != 1) return wrong(traffic_name(kind), traffic.totals(kind).operations, 1);
      if (traffic.totals(kind).bytes != 1024) return wrong(traffic_name(kind), traffic.totals(kind).bytes, 1024);
    }
    if (traffic.requests_in_flight != 0)
      return wrong("requests in flight", static_cast<std::uint64_t>(traffic.requests_in_flight.load()), 0);
    if (traffic.collectives_in_flight != 0)
      return wrong("collectives in flight", static_cast<std::uint64_t>(traffic.collectives_in_flight.load()), 0);
    return std::vector<std::uint8_t>{};
  });
}

TEST_CASE("collectives over the tensor shards' group count apart as well as under their kind", "[traffic]") {
  run_ranks(2, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    const Grid grid{1, 1, 2};
    auto shards = Communicator::create(engine, tp_group(grid, engine.rank()));
    if (!shards) return shards.error();
    auto all = world(engine);
    if (!all) return all.error();
    const Traffic& traffic = *engine.traffic();
    if (auto s = (*shards)->all_reduce(Tensor::zeros({1000}, DType::f32)); !s) return s.error();
    if (auto s = (*all)->all_reduce(Tensor::zeros({10}, DType::f32)); !s) return s.error();
    if (auto s = (*shards)->all_gather(Tensor::zeros({8}, DType::f32)); !s) return s.error();
    const TrafficTotals& sums = traffic.tensor_parallel_totals(TrafficKind::all_reduce);
    if (sums.operations != 1) return wrong("tensor-parallel all_reduce operations", sums.operations, 1);
    if (sums.bytes != 4000) return wrong("tensor-parallel all_reduce bytes", sums.bytes, 4000);
    if (traffic.totals(TrafficKind::all_reduce).bytes != 4040)
      return wrong("all_reduce bytes of every group", traffic.totals(TrafficKind::all_reduce).bytes, 4040);
    if (traffic.tensor_parallel_totals(TrafficKind::all_gather).bytes != 32)
      return wrong("tensor-parallel all_gather bytes", traffic.tensor_parallel_totals(TrafficKind::all_gather).bytes, 32);
    return std::vector<std::uint8_t>{};
  });
}

TEST_CASE("a posted receive counts as in flight until it completes", "[traffic]") {
  run_ranks(2, [](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    const Traffic& traffic = *engine.traffic();
    auto comm = world(engine);
    if (!comm) return comm.error();
    std::vector<float> in(4), out(4, 2.0f);
    std::promise<troupe::Status> received;
    if (engine.rank() == 0)
      engine.post_recv(1, MessageKey{}, in.data(), sizeof(float) * 4, [&](troupe::Status s) { received.set_value(s); });
    // Rank 1 sends only after the barrier, so rank 0's receive is surely waiting at it.
    if (engine.rank() == 0 && traffic.requests_in_flight < 1)
      return wrong("requests in flight while a receive waits", 0, 1);
    if (auto s = (*comm)->barrier(); !s) return s.error();
    if (engine.rank() == 1) {
      std::promise<troupe::Status> sent;
      engine.post_send(0, MessageKey{}, out.data(), sizeof(float) * 4, [&](troupe::Status s) { sent.set_value(s); });
      if (auto s = sent.get_future().get(); !s) return s.error();
    } else if (auto s = received.get_future().get(); !s) {
      return s.error();
    }
    if (traffic.requests_in_flight != 0)
      return wrong("requests in flight at the end", static_cast<std::uint64_t>(traffic.requests_in_flight.load()), 0);
    return std::vector<std::uint8_t>{};
  });
}

TEST_CASE("a context group's exchanges count apart, by method, and touch no other kind", "[traffic]") {
  Traffic traffic;
  traffic.context_finished(ContextTraffic::ring_shift, 1000, std::chrono::milliseconds(250));
  traffic.context_finished(ContextTraffic::ring_shift, 24, std::chrono::milliseconds(250));
  traffic.context_finished(ContextTraffic::all_to_all, 96, std::chrono::milliseconds(1));
  const TrafficTotals& shifts = traffic.context_totals(ContextTraffic::ring_shift);
  CHECK(shifts.operations == 2);
  CHECK(shifts.bytes == 1024);
  CHECK(shifts.nanoseconds == 500'000'000);
  CHECK(traffic.context_totals(ContextTraffic::all_to_all).bytes == 96);
  CHECK(std::string(context_traffic_name(ContextTraffic::ring_shift)) == "ring_shift");
  CHECK(std::string(context_traffic_name(ContextTraffic::all_to_all)) == "all_to_all");
  for (std::size_t k = 0; k < traffic_kinds; ++k) CHECK(traffic.totals(static_cast<TrafficKind>(k)).operations == 0);
}

TEST_CASE("an expert group's all-to-alls count apart from a context group's and from every other kind",
          "[traffic][moe]") {
  Traffic traffic;
  traffic.expert_finished(640, std::chrono::milliseconds(3));
  traffic.expert_finished(16, std::chrono::milliseconds(1));
  CHECK(traffic.expert_totals().operations == 2);
  CHECK(traffic.expert_totals().bytes == 656);
  CHECK(traffic.expert_totals().nanoseconds == 4'000'000);
  for (std::size_t k = 0; k < context_traffic_kinds; ++k)
    CHECK(traffic.context_totals(static_cast<ContextTraffic>(k)).operations == 0);
  for (std::size_t k = 0; k < traffic_kinds; ++k) CHECK(traffic.totals(static_cast<TrafficKind>(k)).operations == 0);
}
