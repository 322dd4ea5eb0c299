#include "actors/actor_system_setup.hpp"

#include <chrono>

#include "actors/local_messages.hpp"
#include "actors/messages.hpp"

namespace troupe::actors {

TroupeConfig::TroupeConfig() {
  add_message_types<caf::id_block::troupe>();
  add_message_types<caf::id_block::troupe_local>();
  load<caf::io::middleman>();
  // CAF's default work-stealing scheduler polls for work after each job, its idle threads waking
  // every 50 us for 500 tries (each try a context switch; on a loaded host the tries stretch to
  // seconds and any message starts them over). Troupe's scheduled actors are few and light (the
  // heavy work is in blocking actors), so the sharing scheduler's threads, which wait on a
  // condition variable, lose nothing; measured (docs/scale.md), 224 ranks waiting in an in-place
  // recovery kept two cores busy through their node processes' polling, and the new process of
  // the lost node starved.
  set("scheduler.policy", caf::atom("sharing"));
}

void beat_connections(caf::actor_system_config& config, const FaultOptions& fault, bool close_silent) {
  const auto span = [](double seconds) {
    return caf::timespan{std::chrono::duration_cast<caf::timespan>(std::chrono::duration<double>(seconds))};
  };
  config.set("middleman.heartbeat-interval", span(fault.heartbeat_seconds));
  if (close_silent) config.set("middleman.connection-timeout", span(fault.heartbeat_timeout));
}

}  // namespace troupe::actors
