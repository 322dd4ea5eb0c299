#include "comm/chain_broadcast.hpp"

#include <algorithm>

namespace troupe::comm {
namespace {

// Chain from position `root`, seen from position p; message index = chunk number:
//  1. the root sends every chunk to the right;
//  2. every other rank receives every chunk in place from the left and, unless its right is
//     the root, sends it on to the right as soon as it has arrived.
//
//   root:  [send chunk c] --sent--> done
//   other: [receive chunk c into place] --received--> right is root? done : [send chunk c] --sent--> done
class ChainBroadcastOp final : public CollectiveOp {
 public:
  ChainBroadcastOp(Engine& engine, const Group& group, MessageKey key, int root, compute::Tensor buffer,
                   std::int64_t chunk_elements, Callback done)
      : CollectiveOp(engine, TrafficKind::broadcast, group, key, std::move(buffer), std::move(done)),
        root_(root),
        chunk_(chunk_elements) {}

 private:
  void begin() override {
    const int n = group().size();
    const int p = group().position_of(engine_.rank());
    const std::int64_t count = buffer().numel();
    const std::int64_t chunks = (count + chunk_ - 1) / chunk_;
    const bool root = p == root_;
    const bool last = (p + 1) % n == root_;
    expect(n == 1 ? 0 : static_cast<std::uint64_t>(chunks) * (root || last ? 1 : 2));
    if (n == 1) return;
    const int left = group().ranks[(p - 1 + n) % n];
    const int right = group().ranks[(p + 1) % n];
    const std::size_t element = compute::dtype_size(buffer().dtype());
    for (std::int64_t c = 0; c < chunks; ++c) {
      std::byte* at = bytes_at(c * chunk_);
      const std::size_t bytes = static_cast<std::size_t>(std::min(chunk_, count - c * chunk_)) * element;
      const auto index = static_cast<std::uint32_t>(c);
      if (root) {
        send(right, index, at, bytes);
      } else {
        recv(left, index, at, bytes, [this, last, right, index, at, bytes] {
          if (!last) send(right, index, at, bytes);
        });
      }
    }
  }

  int root_;
  std::int64_t chunk_;
};

}  // namespace

std::shared_ptr<CollectiveOp> make_chain_broadcast_op(Engine& engine, const Group& group, MessageKey key, int root,
                                                      compute::Tensor buffer, std::int64_t chunk_elements,
                                                      Callback done) {
  return std::make_shared<ChainBroadcastOp>(engine, group, key, root, std::move(buffer), chunk_elements,
                                            std::move(done));
}

}  // namespace troupe::comm
