#pragma once
// All-reduce bus bandwidth against UCX's own point-to-point bandwidth, measured in the same
// run on the same host (what `troupe bench allreduce` prints). Bench code, apart from what
// ships: it forks its ranks with the local bootstrap (comm/bootstrap.hpp).
//
// busbw = 2(n-1)/n · bytes / time, NCCL's convention: the bandwidth each rank's link must
// carry, comparable across n with a point-to-point figure. Time is the median over iterations
// of the slowest rank's all-reduce, every iteration entered together (barrier, untimed). Each
// iteration also runs the ring with every chunk as a message (no mapped blocks) in the same
// processes, so the two compare on the same machine state: the speedup is the median of the
// iterations' ratios. So do a one-way stream of the same size from rank 0 to rank 1, and streams
// both ways between them at once: busbw is also given as the median of its ratio to each
// stream's rate each way, iteration by iteration. A ring's rank sends and receives at once, so
// where the transport costs CPU (TCP's copies in the kernel) the two-way stream is the fair
// reference and the one-way stream the upper bound.
// Point-to-point references, at each all-reduce size as the message size: our engine
// streaming messages one way between two processes (peer error handling on, as in the
// all-reduce), and ucx_perftest's tag_bw (ucx-utils) when it is on the PATH (UCX's defaults:
// no error handling, so single-copy CMA for large messages); across hosts also two
// ucx_perftest pairs at once, host 0 to 1 and 1 to 0 ("perftest 2-way", each way's rate).

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "compute/expected.hpp"

namespace troupe::comm {

struct AllReduceBenchOptions {
  std::vector<int> processes{2, 4};
  std::vector<std::int64_t> bytes{1 << 20, 16 << 20, 64 << 20};  // f32 buffers; p2p messages too
  int warmup = 3;
  int iterations = 15;
  std::chrono::milliseconds timeout{120000};  // per group of processes
  // Across hosts: with hosts > 1, rank r of n runs on host r·hosts/n (in blocks, as a host file
  // places them), put there by `enter_host(host)` in its process before its engine; the
  // point-to-point references run from host 0 to host 1, ucx_perftest's client reaching its server
  // at `host_name(1)`.
  int hosts = 1;
  std::function<Status(int host)> enter_host;
  std::function<std::string(int host)> host_name;
};

struct AllReduceBenchRow {
  int processes = 0;
  std::int64_t bytes = 0;
  double seconds = 0;           // median
  double busbw = 0;             // bytes per second
  double messages_seconds = 0;  // median, every chunk as a message
  double speedup = 0;           // median over iterations of messages / mapped time
  double stream_ratio = 0;      // median over iterations of busbw / the same iteration's one-way stream
  double two_way_ratio = 0;     // ... / the same iteration's stream both ways at once, its rate each way
};

struct PointToPointRow {
  std::string method;
  std::int64_t bytes = 0;  // message size
  double bandwidth = 0;    // bytes per second
};

struct AllReduceBenchReport {
  int hosts = 1;
  std::vector<AllReduceBenchRow> rows;
  std::vector<PointToPointRow> point_to_point;  // every size by our engine; by ucx_perftest when found
};

Expected<AllReduceBenchReport> bench_allreduce(const AllReduceBenchOptions& options);
// The report as two tables; each busbw beside its ratio to the point-to-point figures of the
// same message size.
std::string format_allreduce_report(const AllReduceBenchReport& report);

}  // namespace troupe::comm
