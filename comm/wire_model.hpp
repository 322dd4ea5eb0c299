#pragma once
// The modelled wire of a simulated rank (train.backend sim, docs/scale.md): each message a rank
// sends leaves after the one before it, and takes the link's latency plus its bytes at the link's
// bandwidth, intra-node towards a rank of the same node process and inter-node towards any other.
// The engine of a modelled rank spends that time on its progress thread before it hands the
// message to UCX, so one rank's sends queue on its link as on a real one.

#include <cstddef>

namespace troupe::comm {

struct WireModel {
  int first_local_rank = 0;  // the ranks [first_local_rank, first_local_rank + local_ranks) share a node
  int local_ranks = 1;
  double bandwidth_intra = 0;  // bytes/s
  double bandwidth_inter = 0;
  double latency_intra = 0;  // seconds
  double latency_inter = 0;

  bool same_node(int peer) const { return peer >= first_local_rank && peer < first_local_rank + local_ranks; }
  // Seconds a message of `bytes` to `peer` occupies the link and waits for its first byte.
  double seconds(int peer, std::size_t bytes) const {
    const bool local = same_node(peer);
    return (local ? latency_intra : latency_inter) +
           static_cast<double>(bytes) / (local ? bandwidth_intra : bandwidth_inter);
  }
};

}  // namespace troupe::comm
