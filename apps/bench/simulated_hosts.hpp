#pragma once
// The hosts scripts/netns-cluster.sh simulates (docs/multi-host.md), as benches use them: a forked
// rank enters its host's namespaces before it starts UCX, so ranks on different hosts meet over
// TCP only.

#include <string>

#include "compute/expected.hpp"

namespace troupe::apps {

// Whether hosts h0 .. h(hosts-1) are up; an Error for `bench` naming the first missing one and
// the command that starts them.
Status check_simulated_hosts(const char* bench, int hosts);
// The hosts `bench` can have of the `hosts` asked for: all of them where they are up, or 1 where
// this process is not root (netns needs it), with a line saying the ranks stay on this host; an
// Error where they are not up.
Expected<int> usable_simulated_hosts(const char* bench, int hosts);
// Moves this process (single-threaded: a rank just forked) into simulated host h<index>.
Status enter_simulated_host(int index);
// Shapes both directions of every host's link to `rate` (a tc rate such as "20mbit") with tc tbf,
// as `netns-cluster.sh up --rate` does; an empty rate takes the shaping off. Root only.
Status shape_simulated_hosts(int hosts, const std::string& rate);

}  // namespace troupe::apps
