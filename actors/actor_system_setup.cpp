#include "actors/actor_system_setup.hpp"

#include "actors/messages.hpp"

namespace troupe::actors {

TroupeConfig::TroupeConfig() {
  add_message_types<caf::id_block::troupe>();
  load<caf::io::middleman>();
}

}  // namespace troupe::actors
