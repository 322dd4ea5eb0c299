#pragma once
// How data-parallel replicas keep their weights together (train.sync):
//   allreduce: every step's gradients summed over every replica (data_parallel.hpp).
//   diloco:    replicas form islands that sum every step's gradients inside, and every H steps
//              the islands average their pseudo-gradients with an outer step (outer_step.hpp).

#include <string_view>

namespace troupe::compute {

enum class SyncMode { allreduce, diloco };

// Every mode, in the order train.sync lists them: the config parser reads a name with these.
inline constexpr SyncMode sync_modes[] = {SyncMode::allreduce, SyncMode::diloco};
std::string_view sync_mode_name(SyncMode mode);

}  // namespace troupe::compute
