#pragma once
// The device a sim rank stands for (train.backend sim, the sim.* keys): how fast it computes and
// moves its own memory, and how fast its links carry bytes to another rank on the same node and
// on another node. The defaults are one A100-class device (bf16 dense tensor-core peak, HBM2e)
// with NVLink inside a node and one 200 Gb/s InfiniBand port between nodes.

namespace troupe::compute {

struct SimOptions {
  double flops = 312e12;                // FLOP/s of one rank
  double memory_bandwidth = 2.0e12;     // bytes/s between the rank's memory and its cores
  double link_bandwidth_intra = 300e9;  // bytes/s one way between two ranks of a node
  double link_bandwidth_inter = 25e9;   // bytes/s one way between ranks of two nodes
  double link_latency_intra = 2e-6;     // seconds before a message's first byte arrives, same node
  double link_latency_inter = 5e-6;     // the same between nodes
  bool operator==(const SimOptions&) const = default;
};

}  // namespace troupe::compute
