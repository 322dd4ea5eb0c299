#pragma once
// Which way each peer's data takes, in words a log reader knows: what a rank says once, after
// connecting, so that a job across hosts shows shared memory between ranks that share a host and
// TCP (or another network) across hosts (docs/comm.md, "Transports").

#include <span>
#include <string>
#include <string_view>

#include "comm/engine.hpp"

namespace troupe::comm {

// "shared memory", "TCP", "InfiniBand", "this process" for Engine::transports' text ("sysv/memory",
// "tcp/eth0", "rc_mlx5/mlx5_0:1", "self/memory"); the text itself for a transport not listed.
std::string transport_kind(std::string_view transports);

// "rank 0 reaches rank 1 through shared memory (sysv/memory, mapped blocks); ranks 2, 3 through TCP
// (tcp/eth0)": peers with the same transports and mapping grouped, in the order first met.
std::string describe_peer_transports(const Engine& engine, std::span<const int> peers);

}  // namespace troupe::comm
