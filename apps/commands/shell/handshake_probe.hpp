#pragma once
// Whether a job answers at HOST:PORT, within a bound. CAF 0.17's remote_actor waits without end
// for the peer's BASP handshake, so a listener that accepts and never replies would hang the shell;
// the probe connects on its own socket and waits for the first bytes of the server handshake the
// job sends every new connection, then closes.

#include <chrono>
#include <string>

#include "compute/expected.hpp"

namespace troupe::apps::shell {

Status await_handshake(const std::string& host, int port, std::chrono::seconds timeout);

}  // namespace troupe::apps::shell
