#pragma once
// One place that configures a CAF actor system for Troupe: the message catalogue registered for
// the network, the io middleman loaded, and its heartbeat set so a silent peer is noticed.

#include <caf/all.hpp>
#include <caf/io/all.hpp>

namespace troupe::actors {

class TroupeConfig : public caf::actor_system_config {
 public:
  TroupeConfig();
};

}  // namespace troupe::actors
