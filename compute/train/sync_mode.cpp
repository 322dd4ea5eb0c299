#include "compute/train/sync_mode.hpp"

namespace troupe::compute {

std::string_view sync_mode_name(SyncMode mode) {
  switch (mode) {
    case SyncMode::allreduce: return "allreduce";
    case SyncMode::diloco: return "diloco";
  }
  return "?";
}

}  // namespace troupe::compute
