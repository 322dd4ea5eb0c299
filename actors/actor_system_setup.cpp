#include "actors/actor_system_setup.hpp"

#include "actors/local_messages.hpp"
#include "actors/messages.hpp"

namespace troupe::actors {

TroupeConfig::TroupeConfig() {
  add_message_types<caf::id_block::troupe>();
  add_message_types<caf::id_block::troupe_local>();
  load<caf::io::middleman>();
}

}  // namespace troupe::actors
