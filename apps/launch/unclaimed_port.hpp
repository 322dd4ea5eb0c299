#pragma once
// Loopback ports for a process that is started later and told its port on the command line.
// A port the kernel hands out for bind(0) lies in its ephemeral range, where any outgoing
// connection (UCX's, a test's client) may take it before the started process binds it; a port
// below that range is only ever taken by someone who names it.

#include "compute/expected.hpp"

namespace troupe::launch {

// The first of `count` consecutive loopback TCP ports, below the ephemeral range, that nothing
// listens on now: picked at random and checked by binding each.
Expected<int> unclaimed_port(int count = 1);

}  // namespace troupe::launch
