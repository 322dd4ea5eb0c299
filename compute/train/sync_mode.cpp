#include "compute/train/sync_mode.hpp"

namespace troupe::compute {

std::string_view sync_mode_name(SyncMode mode) {
  switch (mode) {
    case SyncMode::allreduce: return "allreduce";
    case SyncMode::diloco: return "diloco";
  }
  return "?";
}

std::string_view outer_precision_name(OuterPrecision precision) {
  switch (precision) {
    case OuterPrecision::f32: return "f32";
    case OuterPrecision::bf16: return "bf16";
  }
  return "?";
}

}  // namespace troupe::compute
