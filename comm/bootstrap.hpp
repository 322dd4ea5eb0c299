#pragma once
// The test and bench bootstrap: N ranks as forked processes on this host. It is not the job's
// bootstrap (there, worker addresses travel in CAF messages); it exists so comm/ can be tested
// and measured across real processes before and without the control plane.
//
// run_local_ranks() makes one socketpair per rank, then forks the ranks. Each child creates its
// Engine and writes its worker address to the parent; the parent relays the table of all
// addresses to every child; each child connects to every rank and says so; once every rank has
// (or has ended), the parent starts them all, and each runs `body` and writes back its result. So
// no body starts while a peer still waits for it to take its handshake: a body may stop or kill
// its own process at once. Children leave together: the parent releases them only once every child has
// reported or died, so no rank tears its endpoints down while another still talks to it. A
// child still running at the timeout is killed. The parent reaps children as they exit, so a
// killed rank is gone (not a zombie) when its peers look for it. Once a rank has failed or
// died, ranks still running 10 s later are killed: they may be waiting for it forever.
//
// Call it from a process that has not started UCX or other threads: fork copies one thread.
// Frames on the socketpair: 4-byte length (host order), then the bytes.

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "comm/engine.hpp"
#include "compute/expected.hpp"

namespace troupe::comm {

struct LocalRankResult {
  bool reported = false;  // the body ran to the end (ok or not)
  bool ok = false;        // ... and returned a value
  std::string error;      // the body's error, or what went wrong before it ran
  std::vector<std::uint8_t> report;
  int exit_code = -1;      // -1 when a signal ended the process
  int signal = 0;          // the signal that ended it, or 0
  bool timed_out = false;  // killed at the timeout
};

using LocalRankBody = std::function<Expected<std::vector<std::uint8_t>>(Engine& engine)>;
// Runs in rank r's process right after the fork, before its engine: where a bench puts the rank
// (another host's namespaces, comm/bench/allreduce_bench.hpp). Its error is the rank's.
using RankPlacement = std::function<Status(int rank)>;

// Runs `body` on ranks 0..world_size-1, each in its own process with its own engine connected
// to all the others. An Error only when the ranks could not be started at all. With a `wire`
// model the engines are simulated ranks' (Engine::create): every send takes the model's time.
Expected<std::vector<LocalRankResult>> run_local_ranks(int world_size, const LocalRankBody& body,
                                                       std::chrono::milliseconds timeout,
                                                       const RankPlacement& place = {},
                                                       const std::optional<WireModel>& wire = std::nullopt);

}  // namespace troupe::comm
