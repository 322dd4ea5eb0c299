#include "comm/dissemination_barrier.hpp"

namespace troupe::comm {
namespace {

// Position p of n; message index = round number:
//  1. round k = 0: send an empty message to position p+1, receive one from p-1;
//  2. when round k's message has arrived, round k+1 sends to p+2^(k+1) and receives from
//     p-2^(k+1), while 2^(k+1) < n.
// After round k a rank has heard, directly or through others, from the 2^(k+1)-1 ranks before
// it; after the last round from all n-1, so none leaves before every rank has entered.
//
//   [round k: send, receive] --received, 2^(k+1) < n--> [round k+1: send, receive]
//                            --received, last round---> done (when the sends are done too)
class DisseminationBarrierOp final : public CollectiveOp {
 public:
  DisseminationBarrierOp(Engine& engine, const Group& group, MessageKey key, Callback done)
      : CollectiveOp(engine, TrafficKind::barrier, group, key, compute::Tensor::zeros({1}, compute::DType::f32), std::move(done)) {
  }

 private:
  void begin() override {
    int rounds = 0;
    while ((1 << rounds) < group().size()) ++rounds;
    expect(2 * static_cast<std::uint64_t>(rounds));
    if (rounds > 0) round(0, rounds);
  }

  void round(int k, int rounds) {
    const int n = group().size();
    const int p = group().position_of(engine_.rank());
    const int distance = 1 << k;
    send(group().ranks[(p + distance) % n], static_cast<std::uint32_t>(k), bytes_at(0), 0);
    recv(group().ranks[((p - distance) % n + n) % n], static_cast<std::uint32_t>(k), bytes_at(0), 0, [this, k, rounds] {
      if (k + 1 < rounds) round(k + 1, rounds);
    });
  }
};

}  // namespace

std::shared_ptr<CollectiveOp> make_dissemination_barrier_op(Engine& engine, const Group& group, MessageKey key,
                                                            Callback done) {
  return std::make_shared<DisseminationBarrierOp>(engine, group, key, std::move(done));
}

}  // namespace troupe::comm
