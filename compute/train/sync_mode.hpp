#pragma once
// How data-parallel replicas keep their weights together (train.sync):
//   allreduce: every step's gradients summed over every replica (data_parallel.hpp).
//   diloco:    replicas form islands that sum every step's gradients inside, and every H steps
//              the islands average their pseudo-gradients with an outer step (outer_step.hpp).
// DiLoCo's pseudo-gradients are summed over the islands in f32, or rounded to nearest even in
// bf16 (train.diloco_precision), as the bf16 gradient sums of the data-parallel path send theirs,
// or as int8 blocks with a scale each (int8_blocks.hpp), gathered and added by every rank.

#include <cstdint>
#include <string_view>

namespace troupe::compute {

enum class SyncMode { allreduce, diloco };

// Every mode, in the order train.sync lists them: the config parser reads a name with these.
inline constexpr SyncMode sync_modes[] = {SyncMode::allreduce, SyncMode::diloco};
std::string_view sync_mode_name(SyncMode mode);

enum class OuterPrecision : std::uint8_t { f32, bf16, int8 };
// Every precision, in the order train.diloco_precision lists them.
inline constexpr OuterPrecision outer_precisions[] = {OuterPrecision::f32, OuterPrecision::bf16, OuterPrecision::int8};
// Bytes a pseudo-gradient's value takes on the wire (int8: the block's scale shared over its values).
double outer_precision_bytes(OuterPrecision precision);
std::string_view outer_precision_name(OuterPrecision precision);  // "f32", "bf16", "int8"

}  // namespace troupe::compute
