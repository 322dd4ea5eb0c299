#pragma once
// One place that configures a CAF actor system for Troupe: the message catalogue registered for
// the network, the io middleman loaded, the scheduler's threads waiting rather than polling when
// they have no work, and the middleman's heartbeat set so a silent peer is noticed.

#include <caf/all.hpp>
#include <caf/io/all.hpp>

#include "actors/job_options.hpp"

namespace troupe::actors {

class TroupeConfig : public caf::actor_system_config {
 public:
  TroupeConfig();
};

// The middleman sends a heartbeat on every connection each fault.heartbeat_seconds, so a
// connection is never idle while its process lives. With `close_silent` it also closes a
// connection that brought nothing for fault.heartbeat_timeout: a node process whose job became
// unreachable (a cut link delivers neither data nor a close) notices, stops its workers and
// exits instead of waiting forever. The job process does not close silent connections: there a
// silent node is the heartbeat watchdog's to name (hung, stopped or unreachable).
void beat_connections(caf::actor_system_config& config, const FaultOptions& fault, bool close_silent);

}  // namespace troupe::actors
