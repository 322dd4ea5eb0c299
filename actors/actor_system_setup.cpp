#include "actors/actor_system_setup.hpp"

#include <chrono>

#include "actors/local_messages.hpp"
#include "actors/messages.hpp"

namespace troupe::actors {

TroupeConfig::TroupeConfig() {
  add_message_types<caf::id_block::troupe>();
  add_message_types<caf::id_block::troupe_local>();
  load<caf::io::middleman>();
}

void beat_connections(caf::actor_system_config& config, const FaultOptions& fault, bool close_silent) {
  const auto span = [](double seconds) {
    return caf::timespan{std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(seconds))};
  };
  config.set("middleman.heartbeat-interval", span(fault.heartbeat_seconds));
  if (close_silent) config.set("middleman.connection-timeout", span(fault.heartbeat_timeout));
}

}  // namespace troupe::actors
