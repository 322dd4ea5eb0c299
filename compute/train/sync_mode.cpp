#include "compute/train/sync_mode.hpp"

#include "compute/train/int8_blocks.hpp"

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
    case OuterPrecision::int8: return "int8";
  }
  return "?";
}

double outer_precision_bytes(OuterPrecision precision) {
  switch (precision) {
    case OuterPrecision::f32: return 4.0;
    case OuterPrecision::bf16: return 2.0;
    case OuterPrecision::int8: return 1.0 + 4.0 / static_cast<double>(int8_block_values);
  }
  return 4.0;
}

}  // namespace troupe::compute
